# Two commands for users; the rest are helpers they call.
#   make demo   the whole flow against the local OCI simulator (no cloud account needed)
#   make test   every test: lint, sanity, unit, molecule, integration, install-as-a-user, demos
SHELL := /bin/bash
.DEFAULT_GOAL := help

.PHONY: help demo demo-ondemand test venv lint sanity unit molecule integration install build clean

help:
	@echo "make demo   - rehearse the whole flow against the local OCI simulator"
	@echo "make demo-ondemand - the on-demand cluster: a job grows it, idle time shrinks it"
	@echo "make test   - run every test (installs what it needs; see docs/testing.md)"

demo:
	bash tests/infra/host.sh
	bash tests/infra/venv.sh
	bash tests/infra/build-image.sh
	bash tests/demo/run.sh

# Seed 003's on-demand cluster: a job makes GPU nodes appear, they configure themselves, idle
# nodes go away (docs/autoscaling.md).
demo-ondemand:
	bash tests/infra/host.sh
	bash tests/infra/venv.sh
	bash tests/infra/build-image.sh
	bash tests/demo/ondemand.sh

test:
	bash tests/make-test.sh

venv:
	bash tests/infra/venv.sh

lint sanity unit molecule integration install: venv
	STAGES=$@ bash tests/make-test.sh

build: venv
	.venv/bin/ansible-galaxy collection build --force --output-path .build/

clean:
	rm -rf .build tests/output .venv
