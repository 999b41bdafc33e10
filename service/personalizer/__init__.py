"""Azure Personalizer compatibility: what Personalizer's REST shapes mean in Grove's terms.

The routes live in ``service/api/routes/personalizer*.py``; this package holds what they share
and what is not HTTP: API versions and paths (:mod:`.versions`), Personalizer's error codes
(:mod:`.errors`), ISO 8601 durations (:mod:`.durations`), the service configuration and the
learning settings mapped onto an app (:mod:`.configuration`, :mod:`.learning_settings`),
multi-slot events (:mod:`.slots`) and the model file (:mod:`.model_file`).
"""
