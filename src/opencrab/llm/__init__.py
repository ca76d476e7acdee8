"""The LLM layer: neutral types, providers, the router, pricing and usage metrics."""
