"""Fine-tuning tasks (`base.Task`) and the pipelines that train them (finetune, pretraining).

The task modules are imported here so that each registers its tasks (`@register`) whenever any part of this
package is loaded: `task_class("ner")` needs no discovery step.
"""

from zencli.tasks import classification, mrc, ranking, tagging  # noqa: F401  (they register their tasks)
