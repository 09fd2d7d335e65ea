"""The command line (click): wiring only; `main` is the one error boundary."""
