"""The advisor's rules, one module each (registry.RULES: the order advise() runs them, and why), the
Context they read (context.py) and the facts gathered before them: origins.py (introduced or
inherited, per failing op) and mindstudio.overflow_scan. diagnose/advisor.py is the entry point."""
