"""The reference model: SPEC.md in executable form, pure Python, no I/O."""
