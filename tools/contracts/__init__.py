"""The roles' contracts, imported by agents and providers alike: each role's context, output,
prompt and model slot (:mod:`~tools.contracts.roles`, :mod:`~tools.contracts.role_types`,
:mod:`~tools.contracts.model_slots`).

May import: :mod:`tools.offline.offline_answers` (a role declares its offline answer), besides
:mod:`store`.
"""
