"""The local Docker backend (``LocalDockerSandbox``), one concern a module.

- ``environment``: the settings, the container's hardening, the pool, gc;
- ``container``: a live container and the agent's tools in it;
- ``engine``: the Docker client, labels and the run's cleanup scope;
- ``exec``: one ``docker exec``, as root dropped to the sandbox user;
- ``channel`` and ``protocol``: the fast exec channel to the in-container
  helpers (``runner/sandboxes/helpers/``, never imported here);
- ``pool``: warm containers; ``snapshots``: committed images;
- ``seccomp``: the ``seccomp: strict`` profile, from ``data/``.
"""
