"""Reference implementations the tests check Ferry's optimised code against (never shipped)."""
