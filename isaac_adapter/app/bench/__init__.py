"""The benchmarks' code, importable (tests import it from here): ``benchmarks/<name>.py`` runs
``isaac_adapter.app.bench.<name>.main``, and ``python -m isaac_adapter.app.bench.<name>`` the same."""
