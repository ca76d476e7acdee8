"""The web dashboard: server-rendered pages over the same services the REST API uses.

`opencrab up` serves it at `/` next to the API (`[dashboard] enabled`; `[dashboard] port`
serves it on a second port too). Pages are Jinja2 templates rendered on the server, so
they read without JavaScript; `static/dashboard.js` sends every change through the
public REST API (`/api/...`) and HTMX swaps server-rendered fragments; live views read
`/api/ws`. Browser libraries are vendored under `static/vendor/` with their licences.

Layout:
- `routes.py`: the plugin that mounts the pages, the static files and the error pages;
- `render.py`: the template environment, the navigation and the page helpers;
- `login.py`: the token login and logout (when the server requires tokens);
- `pages/<area>.py`: one router per area (agents, persona, skills, memory, sessions,
  workspace, tickets), each rendering `templates/<area>*.html`.
"""
