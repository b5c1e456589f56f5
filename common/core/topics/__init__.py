"""The topics Ferry creates on a destination: how many replicas they get, and the configs that go with them (pure)."""
