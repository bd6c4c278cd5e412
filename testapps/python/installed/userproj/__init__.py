"""A stand-in for a user's own project installed like a framework (pip install .):
tests/e2e/run_python_installed.py copies it under a site-packages/ directory."""
