"""Which library quantizes zen's linear layers to int8 for CPU inference: torch.ao's `quantize_dynamic`
(eager fbgemm/onednn kernels; deprecated API) or torchao's `Int8DynamicActivationInt8WeightConfig`
(`pip install --no-deps torchao`)? Both dynamic: int8 weights, activations quantized per call.

    PYTHONPATH=. python3 reports/int8-choice/int8_compare.py speed SIZE [ROUNDS]
    PYTHONPATH=. python3 reports/int8-choice/int8_compare.py agree MODEL GOLD

`speed`: the ZEN 2.0 encoder of `zen bench model` at SIZE (random weights, 8 × 128 synthetic batch, one
thread, process CPU time, median of ROUNDS interleaved rounds) in fp32, bf16 autocast and int8 from each
library: ms, speed-up over fp32, relative error of the sequence output. `agree`: a fine-tuned model's
labels on GOLD (its task's reader) from each int8 model against fp32: the share of labels that agree and
the task's main score."""

import copy
import sys
import time
import warnings

import numpy as np
import torch

torch.set_num_threads(1)


def torch_ao(module):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(copy.deepcopy(module), {torch.nn.Linear}, dtype=torch.qint8)


def torchao(module):
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    copied = copy.deepcopy(module)
    quantize_(copied, Int8DynamicActivationInt8WeightConfig())
    return copied


LIBRARIES = {"torch.ao quantize_dynamic": torch_ao, "torchao": torchao}


def speed(size_name: str, rounds: int) -> None:
    from zencli.bench.encoder_batches import encoder_inputs, make_batches, synthetic_chars
    from zencli.bench.model import model_config, parse_size
    from zencli.model.pretraining import ZenForPreTraining

    size = parse_size(size_name)
    torch.manual_seed(0)
    enc = ZenForPreTraining(model_config(size, "zen2", vocab_size=21128, ngram_rows=100_000)).bert.eval()
    batch = make_batches(1, batch=8, seq_len=128, slots=128, ngram_rows=100_000, vocab_size=21128,
                         chars=synthetic_chars(8 * 128 * 4, 21128, np.random.default_rng(0)), matcher=None,
                         ngram_rate=0.4, seed=0)[0]
    inputs = encoder_inputs(batch, True)
    variants = {"fp32": (enc, False), "bf16": (enc, True)}
    for name, quantize in LIBRARIES.items():
        t0 = time.process_time()
        variants[f"int8 {name}"] = (quantize(enc), False)
        print(f"quantizing with {name}: {time.process_time() - t0:.2f} s")
    outs, times = {}, {k: [] for k in variants}
    for r in range(rounds + 1):
        names = list(variants)
        for name in names[r % len(names):] + names[:r % len(names)]:
            module, bf16 = variants[name]
            t0 = time.process_time()
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                outs[name] = module(batch["input_ids"], **inputs).sequence_output.float()
            if r:  # the first round warms up
                times[name].append(time.process_time() - t0)
    ref, t32 = outs["fp32"], float(np.median(times["fp32"]))
    for name in variants:
        t = float(np.median(times[name]))
        rel = float((outs[name] - ref).norm() / ref.norm())
        print(f"{size.name}: {name:28s} {1e3 * t:8.1f} ms  {t32 / t:5.2f}× fp32  relative error {rel:.2e}")


def agree(model: str, gold_path: str) -> None:
    from zencli.tasks.model_dir import LoadedModel, load_task_model
    from zencli.tasks.predict import predict_examples

    fp32 = load_task_model(model)
    gold = fp32.task.read(gold_path, "auto")
    ref = predict_examples(fp32, gold.examples)
    flat_ref = [x for labels in ref for x in labels]
    score = fp32.task.evaluate(gold, ref).main_score
    print(f"fp32: main score {100 * score:.2f} over {len(flat_ref):,} labels")
    for name, quantize in LIBRARIES.items():
        q = LoadedModel(quantize(fp32.model), fp32.task, fp32.inputs, fp32.spec, fp32.path)
        t0 = time.process_time()
        pred = predict_examples(q, gold.examples)
        seconds = time.process_time() - t0
        flat = [x for labels in pred for x in labels]
        same = sum(a == b for a, b in zip(flat_ref, flat)) / len(flat_ref)
        print(f"int8 {name}: labels agreeing with fp32 {100 * same:.2f}%, main score "
              f"{100 * fp32.task.evaluate(gold, pred).main_score:.2f}, {seconds:.1f} s CPU")


if __name__ == "__main__":
    if sys.argv[1] == "speed":
        speed(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 5)
    else:
        agree(sys.argv[2], sys.argv[3])
