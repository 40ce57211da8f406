"""A deployment of tourneylake beyond one machine: its code location (``deploy.definitions``)."""
