"""Status computations shared by the scheduler's report and the operators (pure: API views only)."""
