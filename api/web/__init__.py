"""HTTP: the routes, the request and response shapes, the event stream, login."""
