"""Memory lines the hybrid search tests store beside the one they look for: the cat called
Tama (issue 35) and its Japanese twin, among everyday distractors in both languages."""

from __future__ import annotations

TAMA = "the user's cat is called Tama"
TAMA_JA = "ユーザーの猫の名前はタマ"
DISTRACTORS = [
    "we deployed the server on friday evening",
    "the quarterly report is due next week",
    "remember to renew the TLS certificate",
    "the build failed because of a missing semicolon",
    "lunch was ramen at the station",
]
DISTRACTORS_JA = [
    "金曜日の夜にサーバーをデプロイした",
    "四半期報告書の締め切りは来週です",
    "TLS証明書の更新を忘れないこと",
    "セミコロンが抜けていてビルドが失敗した",
    "昼ご飯は駅でラーメンを食べた",
]
