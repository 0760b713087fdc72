# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test helpers: check raw JSON answers against the `oci` SDK's models, sign raw requests."""

from __future__ import annotations

import json

PRIMITIVES = ("str", "int", "float", "bool", "datetime", "date", "object")
# Fields the SDK documents as required that the real service leaves null: platform images belong
# to no compartment.
NULL_IN_PRACTICE = {("Image", "compartmentId")}


def _model_modules():
    import oci  # pylint: disable=import-outside-toplevel
    return (oci.core.models, oci.identity.models, oci.work_requests.models, oci.limits.models, oci.file_storage.models)


def _find_model(name):
    for module in _model_modules():
        if hasattr(module, name):
            return getattr(module, name)
    raise LookupError("no SDK model named {0}".format(name))


def _required(cls, attr):
    prop = getattr(cls, attr, None)
    return bool(prop is not None and prop.__doc__ and "**[Required]**" in prop.__doc__)


def model_problems(data, type_name, where="$"):
    """List what in `data` (decoded JSON) does not fit the SDK type `type_name`: unknown fields,
    missing required fields, wrong JSON types.  Empty list: it fits."""
    problems = []
    if data is None:
        return problems
    if type_name.startswith("list[") and type_name.endswith("]"):
        if not isinstance(data, list):
            return ["{0}: expected a list".format(where)]
        for index, item in enumerate(data):
            problems += model_problems(item, type_name[5:-1], "{0}[{1}]".format(where, index))
        return problems
    if type_name.startswith("dict("):
        if not isinstance(data, dict):
            problems.append("{0}: expected an object".format(where))
        return problems
    if type_name in PRIMITIVES:
        expected = {"str": str, "int": int, "float": (int, float), "bool": bool, "datetime": str, "date": str,
                    "object": object}[type_name]
        if not isinstance(data, expected) or (type_name in ("int", "float") and isinstance(data, bool)):
            problems.append("{0}: {1!r} is not {2}".format(where, data, type_name))
        return problems
    cls = _find_model(type_name)
    if not isinstance(data, dict):
        return ["{0}: expected object for {1}".format(where, type_name)]
    if hasattr(cls, "get_subtype"):
        sub = cls.get_subtype(data)
        cls = _find_model(sub) if isinstance(sub, str) else cls
    model = cls()
    by_json = {v: k for k, v in model.attribute_map.items()}
    for key in data:
        if key not in by_json:
            problems.append("{0}.{1}: not a field of {2}".format(where, key, cls.__name__))
    for attr, json_name in model.attribute_map.items():
        value = data.get(json_name)
        if value is None:
            if _required(cls, attr) and (cls.__name__, json_name) not in NULL_IN_PRACTICE:
                problems.append("{0}.{1}: required by {2} but missing".format(where, json_name, cls.__name__))
            continue
        problems += model_problems(value, model.swagger_types[attr], "{0}.{1}".format(where, json_name))
    return problems


def assert_model(data, type_name):
    problems = model_problems(data, type_name)
    assert not problems, "answer does not fit {0}:\n  {1}\n{2}".format(
        type_name, "\n  ".join(problems[:20]), json.dumps(data)[:300])


def signed_request(sim, method, path, body=None, key=None, key_id=None, headers=None):
    """Send a request signed like the SDK does (optionally with another key or keyId).
    Returns (status, headers, decoded JSON or None)."""
    import oci  # pylint: disable=import-outside-toplevel
    from oci._vendor import requests  # pylint: disable=import-outside-toplevel
    from . import auth  # pylint: disable=import-outside-toplevel

    key = key or sim.key
    if key_id is None:
        key_id = "{0}/{1}/{2}".format(sim.tenancy_id, sim.user_id, auth.fingerprint(key))
    tenancy, user, fingerprint = key_id.split("/", 2)
    signer = oci.signer.Signer(tenancy, user, fingerprint, None,
                               private_key_content=auth.private_pem(key).decode("ascii"))
    data = json.dumps(body) if body is not None else None
    resp = requests.request(method, sim.endpoint + path, data=data, auth=signer, headers=headers or {}, timeout=10)
    try:
        decoded = resp.json() if resp.content else None
    except ValueError:
        decoded = None
    return resp.status_code, resp.headers, decoded
