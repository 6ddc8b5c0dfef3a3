//! `oomlint confirm` end to end.
//!
//! Without the `dynamic` feature only the "not built" message is checked. With
//! `--features dynamic` (LIBTORCH set; see the README) every scenario runs on the CPU
//! at small sizes, and each check compares the flagged variant with the fixed one
//! measured in the same run: a ratio, or a difference over a floor; never an absolute
//! time or an absolute byte count of one variant alone.

use assert_cmd::Command;

#[cfg(feature = "dynamic")]
#[path = "common/sarif.rs"]
mod sarif;

#[cfg(not(feature = "dynamic"))]
#[test]
fn confirm_without_the_feature_says_how_to_build() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.py"), "x = 1\n").unwrap();
    let out = Command::cargo_bin("oomlint")
        .unwrap()
        .current_dir(dir.path())
        .args(["confirm", "t.py"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--features dynamic"), "{stderr}");
    assert!(
        stderr.contains("pip install --no-deps torch==2.11.0"),
        "{stderr}"
    );
    assert!(stderr.contains("LIBTORCH="), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[cfg(feature = "dynamic")]
mod dynamic {
    use super::Command;
    use serde_json::Value;
    use std::path::Path;
    use std::sync::OnceLock;

    /// One file that every scenario's rule fires on (10 findings, 10 scenarios).
    const ALL: &str = r#"import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM


def train(model, loader, optimizer):
    losses = []
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss)
        total += loss
    return losses, total


def train_without_reset(model, loader, optimizer):
    optimizer.zero_grad()
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()


def predict(model, test_loader):
    model.eval()
    outputs = []
    for x, _ in test_loader:
        outputs.append(model(x))
    return outputs


def score(model, loader):
    total = 0.0
    for x in loader:
        total += model(x).sum()
    return total


def load(name):
    model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16, device_map="auto")
    model = model.to(torch.bfloat16)
    model.to("cuda")
    return model


def place(model):
    model = model.cuda()
    model = model.cuda()
    return model


def quantize():
    w = torch.randn(4096, 4096)
    w16 = w.to(torch.float16)
    return w.sum() + w16.sum()
"#;

    /// Small sizes: seconds per variant on two CPU cores.
    const SIZES: &[&str] = &[
        "--device=cpu",
        "--batch=8",
        "--seq=32",
        "--hidden=128",
        "--layers=2",
        "--iterations=10",
    ];

    fn run_in(dir: &Path, args: &[&str]) -> std::process::Output {
        Command::cargo_bin("oomlint")
            .unwrap()
            .current_dir(dir)
            .env("NO_COLOR", "1")
            .args(args)
            .timeout(std::time::Duration::from_secs(900))
            .output()
            .unwrap()
    }

    /// `oomlint confirm --format json` on ALL, run once for the tests that read it.
    fn all_json() -> &'static Vec<Value> {
        static RUN: OnceLock<Vec<Value>> = OnceLock::new();
        RUN.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("all.py"), ALL).unwrap();
            let mut args = vec!["confirm", "--format", "json"];
            args.extend_from_slice(SIZES);
            args.push("all.py");
            let out = run_in(dir.path(), &args);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                out.status.code(),
                Some(1),
                "findings: exit 1\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let v: Value = serde_json::from_str(&stdout).expect("json");
            let all = v.as_array().expect("an array").clone();
            // Every figure in the CI log, for people reading it.
            for f in &all {
                eprintln!(
                    "{} {}: {}",
                    f["code"], f["confirmation"]["scenario"], f["confirmation"]["summary"]
                );
            }
            all
        })
    }

    fn confirmation(scenario: &str) -> &'static Value {
        all_json()
            .iter()
            .map(|f| &f["confirmation"])
            .find(|c| c["scenario"] == scenario)
            .unwrap_or_else(|| panic!("no finding measured with {scenario}"))
    }

    fn figure(c: &Value, variant: &str) -> f64 {
        c[variant]["value_bytes"]
            .as_f64()
            .unwrap_or_else(|| panic!("{variant} value_bytes in {c:#}"))
    }

    /// The flagged variant costs clearly more than the fixed one: the difference clears
    /// `floor` bytes and the flagged figure is at least `ratio` times the fixed one.
    fn assert_clearly_more(scenario: &str, floor: f64, ratio: f64) {
        let c = confirmation(scenario);
        let (f, x) = (figure(c, "flagged"), figure(c, "fixed"));
        assert!(
            f - x > floor && f >= ratio * x.max(0.0),
            "{scenario}: flagged {f} vs fixed {x} bytes (floor {floor}, ratio {ratio}): {c:#}"
        );
        assert_eq!(c["verdict"], "confirmed", "{scenario}: {c:#}");
    }

    #[test]
    fn every_finding_has_a_confirmation_and_the_json_keys() {
        let all = all_json();
        assert_eq!(all.len(), 10, "{all:#?}");
        for f in all {
            // The keys of every JSON finding (the ten, and ruff's `fix`, null when the
            // rule has none), plus `confirmation` (serde_json's map is sorted; the order
            // on the wire is pinned by the cli snapshots).
            let mut keys: Vec<&str> = f.as_object().unwrap().keys().map(|k| k.as_str()).collect();
            keys.sort_unstable();
            let mut want = [
                "code",
                "name",
                "severity",
                "message",
                "help",
                "path",
                "line",
                "column",
                "end_line",
                "end_column",
                "fix",
                "confirmation",
            ];
            want.sort_unstable();
            assert_eq!(keys, want);
            let c = &f["confirmation"];
            assert_eq!(c["device"], "CPU");
            assert_eq!(c["sizes"]["hidden"], 128);
            assert_eq!(c["iterations"], 10);
            assert!(c["flagged"]["samples"].is_array(), "{c:#}");
        }
    }

    // Growth per iteration. Keeping the loss after backward() keeps only the graph's
    // nodes (kilobytes per step); keeping outputs without backward keeps activations.
    #[test]
    fn keep_loss_grows_more_than_item() {
        assert_clearly_more("keep-loss", 1024.0, 4.0);
    }

    #[test]
    fn accumulate_loss_grows_more_than_item() {
        assert_clearly_more("accumulate-loss", 1024.0, 4.0);
    }

    #[test]
    fn keep_output_grows_more_than_detach() {
        assert_clearly_more("keep-output", 64.0 * 1024.0, 2.0);
    }

    #[test]
    fn accumulate_output_grows_more_than_item() {
        assert_clearly_more("accumulate-output", 64.0 * 1024.0, 4.0);
    }

    #[test]
    fn eval_with_grad_grows_more_than_no_grad() {
        assert_clearly_more("eval-grad", 64.0 * 1024.0, 2.0);
    }

    #[test]
    fn no_zero_grad_accumulates_gradients_and_raises_the_peak() {
        let c = confirmation("no-zero-grad");
        let gf = c["flagged"]["grad_norm_growth"].as_f64().unwrap();
        let gx = c["fixed"]["grad_norm_growth"].as_f64().unwrap();
        assert!(gf > 4.0 * gx, "gradient norm growth {gf} vs {gx}: {c:#}");
        // Gradients kept through the forward pass: about one copy of the weights more.
        let params = c["flagged"]["param_bytes"].as_f64().unwrap();
        let diff = figure(c, "flagged") - figure(c, "fixed");
        assert!(
            diff > 0.5 * params,
            "extra peak {diff} vs weights {params}: {c:#}"
        );
        assert_eq!(c["verdict"], "confirmed");
    }

    #[test]
    fn converting_into_a_new_name_keeps_both_copies() {
        let c = confirmation("dtype-copy");
        let params = c["flagged"]["param_bytes"].as_f64().unwrap();
        // float32 weights plus a float16 copy, against float16 weights alone.
        assert_clearly_more("dtype-copy", 0.5 * params, 1.5);
    }

    #[test]
    fn a_second_copy_on_the_device_costs_the_weights() {
        let c = confirmation("device-copy");
        let params = c["flagged"]["param_bytes"].as_f64().unwrap();
        assert_clearly_more("device-copy", 0.5 * params, 2.0);
    }

    // Honest results: a conversion or move to where the weights already are is a no-op.
    #[test]
    fn redundant_conversions_cost_nothing_and_say_so() {
        for s in ["dtype-redundant", "device-redundant"] {
            let c = confirmation(s);
            let params = c["flagged"]["param_bytes"].as_f64().unwrap();
            let diff = (figure(c, "flagged") - figure(c, "fixed")).abs();
            assert!(diff < 0.05 * params, "{s}: {diff} bytes: {c:#}");
            assert_eq!(c["verdict"], "not_confirmed", "{s}: {c:#}");
            assert!(c["summary"].as_str().unwrap().starts_with("no memory cost"));
        }
    }

    #[test]
    fn text_sarif_and_concise_carry_the_verdict() {
        let dir = tempfile::tempdir().unwrap();
        let src = "import torch\n\ndef quantize():\n    w = torch.randn(1024, 1024)\n    w16 = w.to(torch.float16)\n    return w.sum() + w16.sum()\n";
        std::fs::write(dir.path().join("q.py"), src).unwrap();
        let confirm = |format: &str| {
            let mut args = vec!["confirm", "--format", format];
            args.extend_from_slice(SIZES);
            args.push("q.py");
            let out = run_in(dir.path(), &args);
            assert_eq!(out.status.code(), Some(1), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        let text = confirm("text");
        let line = text
            .lines()
            .find(|l| l.starts_with("  confirmed on CPU: +"))
            .unwrap_or_else(|| panic!("no verdict line:\n{text}"));
        assert!(line.contains("kept after the conversion"), "{line}");
        assert!(
            text.contains("  measured: weights converted to float16 into new tensors"),
            "{text}"
        );

        let sarif: Value = serde_json::from_str(&confirm("sarif")).unwrap();
        // Still SARIF 2.1.0 with the confirmation in the result's property bag.
        crate::sarif::validate("text_sarif_and_concise_carry_the_verdict", &sarif);
        let result = &sarif["runs"][0]["results"][0];
        assert_eq!(result["properties"]["confirmation"]["verdict"], "confirmed");
        assert!(result["message"]["text"]
            .as_str()
            .unwrap()
            .contains("\nconfirmed on CPU: +"));

        // On the wire: the ten keys in their usual order, then `confirmation`.
        let json = confirm("json");
        let at: Vec<usize> = [
            "code",
            "name",
            "severity",
            "message",
            "help",
            "path",
            "line",
            "column",
            "end_line",
            "end_column",
            "confirmation",
        ]
        .iter()
        .map(|k| {
            json.find(&format!("\n    \"{k}\": "))
                .unwrap_or_else(|| panic!("{k}: {json}"))
        })
        .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{json}");

        let concise = confirm("concise");
        assert!(concise.contains("[confirmed on CPU: +"), "{concise}");
    }

    #[test]
    fn out_of_memory_and_harness_failures_are_verdicts_not_crashes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("all.py"), ALL).unwrap();
        // An input of 2^50 floats: libtorch's allocator refuses it in both variants.
        let out = run_in(
            dir.path(),
            &[
                "confirm",
                "--format=json",
                "--device=cpu",
                "--batch=1048576",
                "--seq=1048576",
                "--hidden=1024",
                "--layers=1",
                "--iterations=3",
                "--select=OOM201",
                "all.py",
            ],
        );
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        for f in v.as_array().unwrap() {
            let c = &f["confirmation"];
            assert_eq!(c["verdict"], "skipped", "{c:#}");
            assert!(
                c["summary"]
                    .as_str()
                    .unwrap()
                    .contains("both variants ran out of memory"),
                "{c:#}"
            );
            assert!(c["flagged"]["oom_message"]
                .as_str()
                .unwrap()
                .contains("can't allocate memory"));
        }

        // A module that cannot be loaded: every finding is skipped, with the reason.
        std::fs::write(dir.path().join("bad.pt"), "not a module").unwrap();
        let out = run_in(
            dir.path(),
            &[
                "confirm",
                "--format=json",
                "--device=cpu",
                "--model=bad.pt",
                "--input-shape=2x4",
                "--select=OOM101",
                "all.py",
            ],
        );
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let c = &v[0]["confirmation"];
        assert_eq!(c["verdict"], "skipped", "{c:#}");
        assert!(
            c["summary"]
                .as_str()
                .unwrap()
                .contains("cannot load bad.pt"),
            "{c:#}"
        );

        // A child that aborts (libtorch's way to die) ends only itself.
        let out = Command::cargo_bin("oomlint")
            .unwrap()
            .current_dir(dir.path())
            .env("OOMLINT_TEST_ABORT_SCENARIO", "no-zero-grad")
            .args(["confirm", "--format=json", "--select=OOM101"])
            .args(SIZES)
            .arg("all.py")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let c = &v[0]["confirmation"];
        assert_eq!(c["verdict"], "skipped", "{c:#}");
        assert!(c["summary"].as_str().unwrap().contains("signal 6"), "{c:#}");
    }

    /// `--model`: a TorchScript module traced with tch (its weights are constants, so
    /// it builds no graph: evaluation with grad costs nothing, and training or
    /// converting it is skipped, with the reason).
    #[test]
    fn a_torchscript_module_instead_of_the_built_in_model() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("all.py"), ALL).unwrap();
        let (cpu, float) = (tch::Device::Cpu, tch::Kind::Float);
        let w = tch::Tensor::randn([64, 64], (float, cpu));
        let x = tch::Tensor::randn([4, 64], (float, cpu));
        let mut forward = |ts: &[tch::Tensor]| vec![ts[0].matmul(&w).relu().matmul(&w)];
        let module =
            tch::CModule::create_by_tracing("Net", "forward", &[x], &mut forward).expect("traced");
        module.save(dir.path().join("net.pt")).expect("saved");
        let out = run_in(
            dir.path(),
            &[
                "confirm",
                "--format=json",
                "--device=cpu",
                "--model=net.pt",
                "--input-shape=32x64",
                "--iterations=5",
                "--select=OOM301,OOM101,OOM401",
                "all.py",
            ],
        );
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let by_scenario = |s: &str| {
            v.as_array()
                .unwrap()
                .iter()
                .map(|f| &f["confirmation"])
                .find(|c| c["scenario"] == s)
                .unwrap_or_else(|| panic!("{s}: {v:#}"))
                .clone()
        };
        let eval = by_scenario("eval-grad");
        assert_eq!(eval["sizes"]["model"], "net.pt", "{eval:#}");
        assert_eq!(eval["sizes"]["input_shape"], serde_json::json!([32, 64]));
        assert_eq!(eval["verdict"], "not_confirmed", "{eval:#}");
        for s in ["no-zero-grad", "dtype-copy"] {
            let c = by_scenario(s);
            assert_eq!(c["verdict"], "skipped", "{c:#}");
            assert!(
                c["summary"].as_str().unwrap().contains("no parameters"),
                "{c:#}"
            );
        }
    }

    #[test]
    fn device_cuda_without_a_gpu_is_a_usage_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("all.py"), ALL).unwrap();
        let out = run_in(
            dir.path(),
            &[
                "confirm",
                "--device=cuda",
                "--select=OOM401",
                "--iterations=3",
                "all.py",
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            // This machine has a GPU: the run measured on it.
            Some(1) => assert!(String::from_utf8_lossy(&out.stdout).contains(" on ")),
            _ => {
                assert_eq!(out.status.code(), Some(2), "{stderr}");
                assert!(stderr.contains("--device cuda: "), "{stderr}");
                assert!(out.stdout.is_empty());
            }
        }
    }

    /// One file that each rule of issue 16 fires on once (five findings, five scenarios).
    const LOADS_AND_GRAPHS: &str = r#"import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer

tokenizer = AutoTokenizer.from_pretrained("gpt2")


def train(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward(retain_graph=True)
        optimizer.step()


def load(name):
    model = AutoModelForCausalLM.from_pretrained(name)
    model = model.half()
    return model


def resume(model, path):
    model.cuda()
    model.load_state_dict(torch.load(path))


@torch.no_grad()
def predict(model, test_loader):
    preds = []
    for x, _ in test_loader:
        preds.append(model(x.cuda()).argmax(-1))
    return torch.cat(preds)


def tokenize(batch):
    return tokenizer(batch["text"], truncation=True, max_length=2048, padding="max_length")


def fit(model, ds):
    ds = ds.map(tokenize, batched=True)
    Trainer(model=model, train_dataset=ds).train()
"#;

    fn loads_and_graphs_json() -> &'static Vec<Value> {
        static RUN: OnceLock<Vec<Value>> = OnceLock::new();
        RUN.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("lg.py"), LOADS_AND_GRAPHS).unwrap();
            let mut args = vec!["confirm", "--format", "json"];
            args.extend_from_slice(SIZES);
            args.push("lg.py");
            let out = run_in(dir.path(), &args);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.code(), Some(1), "{stdout}");
            let v: Value = serde_json::from_str(&stdout).expect("json");
            let all = v.as_array().expect("an array").clone();
            for f in &all {
                eprintln!(
                    "{} {}: {}",
                    f["code"], f["confirmation"]["scenario"], f["confirmation"]["summary"]
                );
            }
            all
        })
    }

    /// Flagged against fixed in the same `confirm` run of `LOADS_AND_GRAPHS`.
    fn assert_new_clearly_more(scenario: &str, floor: f64, ratio: f64) {
        let c = loads_and_graphs_json()
            .iter()
            .map(|f| &f["confirmation"])
            .find(|c| c["scenario"] == scenario)
            .unwrap_or_else(|| panic!("no finding measured with {scenario}"));
        let (f, x) = (figure(c, "flagged"), figure(c, "fixed"));
        let params = c["flagged"]["param_bytes"].as_f64().unwrap();
        assert!(
            f - x > floor * params && f >= ratio * x.max(0.0),
            "{scenario}: flagged {f} vs fixed {x} bytes (floor {floor} x weights {params}, ratio {ratio}): {c:#}"
        );
        assert_eq!(c["verdict"], "confirmed", "{scenario}: {c:#}");
    }

    #[test]
    fn each_new_rule_has_its_scenario() {
        let mut got: Vec<(String, String)> = loads_and_graphs_json()
            .iter()
            .map(|f| {
                (
                    f["code"].as_str().unwrap().to_owned(),
                    f["confirmation"]["scenario"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        got.sort();
        let want = [
            ("OOM203", "retain-graph"),
            ("OOM204", "eval-outputs-on-device"),
            ("OOM403", "load-then-convert"),
            ("OOM501", "checkpoint-on-device"),
            ("OOM502", "pad-to-max-length"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    // Peaks. A retained graph is alive during the next step's forward: two steps'
    // activations at once instead of one.
    #[test]
    fn a_retained_graph_raises_the_peak() {
        assert_new_clearly_more("retain-graph", 0.5, 1.3);
    }

    // Four times the sequence: the activations of every block grow with it.
    #[test]
    fn padding_to_max_length_raises_the_peak() {
        assert_new_clearly_more("pad-to-max-length", 1.0, 2.0);
    }

    // float32 weights, then their float16 copies, against float16 weights alone.
    #[test]
    fn loading_in_float32_then_converting_peaks_at_float32() {
        assert_new_clearly_more("load-then-convert", 0.5, 1.5);
    }

    // The checkpoint in new tensors beside the model, against copied from a mapping.
    #[test]
    fn a_checkpoint_on_the_device_costs_the_weights_again() {
        assert_new_clearly_more("checkpoint-on-device", 0.5, 2.0);
    }

    // Growth per batch: one output per batch kept on the device (8 x 32 x 128 floats,
    // 128 KiB) against its argmax on the CPU.
    #[test]
    fn eval_outputs_kept_on_the_device_grow_more_than_argmax_on_the_cpu() {
        let c = loads_and_graphs_json()
            .iter()
            .map(|f| &f["confirmation"])
            .find(|c| c["scenario"] == "eval-outputs-on-device")
            .expect("measured");
        let (f, x) = (figure(c, "flagged"), figure(c, "fixed"));
        assert!(
            f - x > 64.0 * 1024.0 && f >= 4.0 * x.max(0.0),
            "{f} vs {x}: {c:#}"
        );
        assert_eq!(c["verdict"], "confirmed", "{c:#}");
    }
}
