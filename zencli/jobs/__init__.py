"""Job assembly: recipe + `--set` overrides + options → a typed config, and the workspace's defaults chain.

    zencli.jobs.lexicon    build_config (LexiconConfig), build_workspace_lexicon (`zen lexicon`, no arguments)
    zencli.jobs.pretrain   build_config (PretrainConfig), workspace_config (`zen pretrain`, no recipe),
                           expected_duration (the line said before the step starts)
    zencli.jobs.finetune   build_config (FinetuneConfig; without a recipe, a from-scratch run starts from the
                           task's tiny recipe), workspace_config (`zen finetune --task T`), expected_duration
    zencli.jobs.training   training_job: `zen pretrain` / `zen finetune` settings, the workspace's step or a recipe
    zencli.jobs.pretrain, zencli.jobs.finetune   run_job: train here, or start `--nproc` processes (jobs.common)
    zencli.jobs.workspace  the pipeline's policy: the workspace's folders, its default corpus and recipes, and how
                           a quickstart budget is split among the steps

The command modules (zencli.cli), the quickstart and the benchmarks call these, so a command and a
benchmark that names the same recipe and settings train exactly the same thing. This layer sits above
the tasks and below the CLI: it never imports zencli.cli, typer or torch at import time.
"""
