"""HTTP routes, one router per resource: each parses, calls one service function, renders.

What routes share lives below them: dependencies here (`deps`), schemas beside their
resources, errors in `app.core.errors`, HTTP plumbing in `app.core.http`."""
