"""A scontrol stand-in for tests: `show node --oneliner NAME` and `update NodeName=NAME State=...`
against the nodes in the JSON file named by $OCIGPU_SCONTROL_STATE:
{"nodes": {"gpu-1": {"state": "IDLE", "reason": "", "addr": "10.0.2.7"}}, "calls": [[...], ...]}.
Every call is recorded. A drain keeps the base state (IDLE+DRAIN, MIXED+DRAIN); a resume drops DRAIN.
A node with "job_at_drain": true takes a job as it is drained (MIXED+DRAIN), as when a job starts
between a check's read and its drain."""
import json
import os
import sys

path = os.environ['OCIGPU_SCONTROL_STATE']
with open(path) as handle:
    s = json.load(handle)
args = sys.argv[1:]
s['calls'].append(args)
code = 0
if args[:2] == ['show', 'node']:
    node = s['nodes'].get(args[-1])
    if node is None:
        print('Node %s not found' % args[-1], file=sys.stderr)
        code = 1
    else:
        reason = (' Reason=%s [root@2026-11-23T10:00:00]' % node['reason']) if node.get('reason') else ''
        print('NodeName=%s Arch=x86_64 NodeAddr=%s State=%s Partitions=gpu%s'
              % (args[-1], node.get('addr', args[-1]), node['state'], reason))
elif args[:1] == ['update']:
    fields = dict(a.split('=', 1) for a in args[1:])
    node = s['nodes'][fields['NodeName']]
    base = node['state'].split('+')[0]
    if fields['State'] == 'DRAIN':
        base = 'MIXED' if node.pop('job_at_drain', False) else base
        node['state'], node['reason'] = base + '+DRAIN', fields['Reason']
    elif fields['State'] == 'RESUME':
        node['state'], node['reason'] = base, ''
else:
    print('scontrol stand-in: %s not handled' % ' '.join(args), file=sys.stderr)
    code = 2
with open(path, 'w') as handle:
    json.dump(s, handle)
sys.exit(code)
