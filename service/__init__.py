"""Grove's service layer: HTTP API, Redis storage, trainer loop, job worker and CLI."""
