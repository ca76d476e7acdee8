"""The HTTP server: FastAPI app, routers under /api, error handling."""
