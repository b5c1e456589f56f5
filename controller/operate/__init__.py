"""An operator's controls over a running fleet: pause, cordon and drain, autobalancing, throttles."""
