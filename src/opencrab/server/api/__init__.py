"""One router per resource; each module registers itself through the plugin hook."""
