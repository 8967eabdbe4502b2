"""Helpers of the ``tests/test_impl_*`` tests: scripted workloads and a child process."""
