"""HTTP plumbing shared by every route: JSON, pagination, body limits, request ids."""
