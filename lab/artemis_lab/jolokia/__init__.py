"""Jolokia 2 protocol endpoint of the lab broker (`/console/jolokia`): ObjectNames, request handling, HTTP."""
