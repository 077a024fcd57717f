"""The workloads a run drives: the worker every run process executes (worker.py) and the profiles (*.toml).

Why a folder of its own: the design keeps the workload apart from the runner (the runner never imports it;
takeover._internal.stress_run hands it over) and beside its profiles, which `--profile NAME` reads.
"""
