"""Package data of the sandbox (the recorded metadata used as the template of ours)."""
