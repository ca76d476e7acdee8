"""The origin a stored API key was entered for: `llm_provider_settings.api_key_origin`.

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-25

`scheme://host[:port]` of the base URL in effect when the key was stored (issue 31,
point 4): the key is sent only there (opencrab.llm.key_origin). Keys stored before this
revision have none and keep the origin in effect when their base URL next changes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("llm_provider_settings") as batch:
        batch.add_column(sa.Column("api_key_origin", sa.String(length=300), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("llm_provider_settings") as batch:
        batch.drop_column("api_key_origin")
