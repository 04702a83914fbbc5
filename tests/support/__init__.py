"""Test support code shared by the test suites (not part of the koordpy package)."""
