"""Job assembly: recipe + `--set` overrides + options → a typed config, and the workspace's defaults chain.

    zencli.jobs.lexicon    build_config (LexiconConfig), build_workspace_lexicon (`zen lexicon`, no arguments)
    zencli.jobs.pretrain   build_config (PretrainConfig), workspace_config (`zen pretrain`, no recipe)
    zencli.jobs.finetune   build_config (FinetuneConfig), workspace_config (`zen finetune --task T`, no recipe)

The command modules (zencli.cli), the quickstart and the benchmarks call these, so a command and a
benchmark that names the same recipe and settings train exactly the same thing. This layer sits above
the tasks and below the CLI: it never imports zencli.cli, typer or torch at import time.
"""
