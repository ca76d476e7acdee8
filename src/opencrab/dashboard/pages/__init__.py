"""One router per area of the dashboard (see opencrab.dashboard.routes.PAGE_MODULES)."""
