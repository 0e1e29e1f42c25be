"""deploy/daqrun's package: the topology, the launcher and its backends.

- cli.py:       the command line (declared once: argparse, --help, the docs' table), main()
- schema.py:    the topology's keys (declared once: validation, --set, the docs' tables)
- topology.py:  reading, --set and validating a topology file into a Topology
- daemons.py:   the daemons' command lines, the run key, when refbuild applies
- launcher.py:  the run: start in order, watch, faults, progress, stop, params.json
- doctables.py: docs/TOPOLOGY.md's tables made from the declarations
- cleanup.py:   leftovers of crashed runs (deploy/daqrun --cleanup)
- backends/:    where and how daemons start (local, netns, ssh), one module each

Standard library only; the stock tools ip, tc, unshare, chronyd, chronyc,
ssh and tar do the work. docs/DEPLOY.md describes the backends, docs/CODE.md
where a new one goes.
"""
