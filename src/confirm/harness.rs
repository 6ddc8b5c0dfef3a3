//! The child side of `oomlint confirm`: one variant of one scenario, run with tch on a
//! model of the given sizes (or the user's TorchScript module), measured as it runs.
//!
//! It prints `P <n>` after each iteration (the parent's progress bar) and one
//! `R <json>` line at the end: a [`ChildReport`]. An out-of-memory error of libtorch is
//! caught and reported with the iteration it happened at; a harder crash (an abort, the
//! kernel's OOM killer) ends only this process, and the parent reports it.

use std::cell::Cell;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::ExitCode;

use tch::{CModule, COptimizer, Device, Kind, Tensor};

use super::ffi;
use super::{
    ChildReport, ConfirmOptions, DeviceChoice, DeviceInfo, Measurement, Scenario, ScenarioArgs,
    Variant, WARMUP,
};

fn emit(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn report(r: &ChildReport) {
    emit(&format!(
        "R {}",
        serde_json::to_string(r).expect("a report serializes")
    ));
}

pub fn main(args: &ScenarioArgs) -> ExitCode {
    let (device, info) = match select_device(args.opts.device) {
        Ok(d) => d,
        Err(error) => {
            report(&ChildReport::Failed {
                device: None,
                error,
            });
            return ExitCode::SUCCESS;
        }
    };
    if args.probe {
        report(&ChildReport::Probe(info));
        return ExitCode::SUCCESS;
    }
    let (Some(scenario), Some(variant)) = (args.scenario, args.variant) else {
        report(&ChildReport::Failed {
            device: Some(info),
            error: "no scenario given".to_owned(),
        });
        return ExitCode::SUCCESS;
    };
    // For the tests: a child that dies the way libtorch dies (abort) on this scenario.
    if std::env::var("OOMLINT_TEST_ABORT_SCENARIO").as_deref() == Ok(scenario.name()) {
        std::process::abort();
    }
    // Panics are reported as results below, not printed.
    std::panic::set_hook(Box::new(|_| {}));
    tch::manual_seed(0);
    let iteration = Cell::new(0u32);
    let mut m = Measurement::default();
    let result = catch_unwind(AssertUnwindSafe(|| {
        run(scenario, variant, &args.opts, device, &mut m, &iteration)
    }));
    let failed = |error: String| ChildReport::Failed {
        device: Some(info.clone()),
        error,
    };
    let r = match result {
        Ok(Ok(())) => ChildReport::Measured {
            device: info.clone(),
            measurement: m,
        },
        Ok(Err(e)) => failed(e),
        Err(panic) => {
            let msg = panic_message(&panic);
            if is_out_of_memory(&msg) {
                m.oom_at_iteration = Some(iteration.get());
                m.oom_message = Some(first_line(&msg));
                ChildReport::Measured {
                    device: info.clone(),
                    measurement: m,
                }
            } else {
                failed(first_line(&msg))
            }
        }
    };
    report(&r);
    ExitCode::SUCCESS
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_owned()
    }
}

/// tch's panics carry libtorch's message: `CUDA out of memory. Tried to allocate ...`
/// on a GPU, `DefaultCPUAllocator: can't allocate memory` on the CPU.
fn is_out_of_memory(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("out of memory") || m.contains("can't allocate memory")
}

fn first_line(msg: &str) -> String {
    // tch wraps libtorch's error: `called `Result::unwrap()` on an `Err` value: Torch("...`
    let s = msg
        .split_once("Torch(\"")
        .map_or(msg, |(_, rest)| rest)
        .lines()
        .next()
        .unwrap_or("")
        .trim_end_matches("\")");
    s.chars().take(300).collect()
}

/// The device to measure on. CUDA needs `libtorch_cuda.so`, which the linker dropped:
/// it is loaded here, before any CUDA call; under `auto` a failure means "no CUDA".
fn select_device(choice: DeviceChoice) -> Result<(Device, DeviceInfo), String> {
    let cpu = |note: Option<String>| {
        ffi::live_heap_bytes()?;
        Ok((
            Device::Cpu,
            DeviceInfo {
                device: "cpu".to_owned(),
                name: "CPU".to_owned(),
                memory: "live heap bytes (glibc mallinfo2: uordblks + hblkhd)".to_owned(),
                note,
                ..Default::default()
            },
        ))
    };
    if choice == DeviceChoice::Cpu {
        return cpu(None);
    }
    let why_not = match ffi::load_libtorch_cuda() {
        Err(e) => format!("cannot load libtorch_cuda.so: {e}"),
        Ok(()) if !tch::Cuda::is_available() => {
            "libtorch_cuda.so is loaded but libtorch sees no CUDA device".to_owned()
        }
        Ok(()) => {
            let device = Device::Cuda(0);
            // Initialise the device (and its allocator) before asking about memory.
            let _ = Tensor::zeros([1], (Kind::Float, device));
            let (free, total) = ffi::accel_memory_info(0)?;
            ffi::accel_stats(0)?;
            let name = ffi::cuda_device_name(0).unwrap_or_else(|| "CUDA device 0".to_owned());
            return Ok((
                device,
                DeviceInfo {
                    device: "cuda:0".to_owned(),
                    name,
                    memory: "CUDA caching allocator, allocated bytes".to_owned(),
                    free_bytes: Some(free),
                    total_bytes: Some(total),
                    note: None,
                },
            ));
        }
    };
    match choice {
        DeviceChoice::Cuda => Err(format!("--device cuda: {why_not}")),
        _ => cpu(Some(why_not)),
    }
}

/// Live bytes of the device being measured, and their peak.
enum Meter {
    /// glibc's live heap; the peak is the highest sample.
    Heap { peak: i64 },
    /// The CUDA caching allocator's allocated bytes and peak.
    Cuda,
}

impl Meter {
    fn new(device: Device) -> Self {
        match device {
            Device::Cuda(_) => Meter::Cuda,
            _ => Meter::Heap { peak: 0 },
        }
    }

    fn live(&self) -> i64 {
        match self {
            Meter::Heap { .. } => ffi::live_heap_bytes().unwrap_or(0),
            Meter::Cuda => ffi::accel_stats(0).map_or(0, |s| s.allocated),
        }
    }

    /// Starts the measured part: the peak restarts from here. Returns the live bytes.
    fn begin(&mut self) -> i64 {
        let live = self.live();
        match self {
            Meter::Heap { peak } => *peak = live,
            Meter::Cuda => {
                let _ = ffi::accel_reset_peak(0);
            }
        }
        live
    }

    /// Takes a sample (on the CPU the peak is the highest sample). Returns the live bytes.
    fn sample(&mut self) -> i64 {
        let live = self.live();
        if let Meter::Heap { peak } = self {
            *peak = (*peak).max(live);
        }
        live
    }

    fn peak(&self) -> i64 {
        match self {
            Meter::Heap { peak } => *peak,
            Meter::Cuda => ffi::accel_stats(0).map_or(0, |s| s.allocated_peak),
        }
    }
}

/// The model under measurement: the built-in stack of attention and MLP blocks, or a
/// TorchScript module.
enum Net {
    /// Per block: wq, wk, wv, wo (hidden x hidden), w1 (hidden x 4 hidden), w2 (4 hidden x hidden).
    Builtin {
        blocks: Vec<[Tensor; 6]>,
        hidden: i64,
    },
    Script(CModule),
}

impl Net {
    fn new(opts: &ConfirmOptions, device: Device) -> Result<Net, String> {
        if let Some(path) = &opts.model {
            let m = CModule::load_on_device(path, device).map_err(|e| {
                format!(
                    "cannot load {}: {}",
                    path.display(),
                    first_line(&e.to_string())
                )
            })?;
            return Ok(Net::Script(m));
        }
        let h = opts.hidden;
        let w = |i: i64, o: i64| {
            (Tensor::randn([i, o], (Kind::Float, device)) * (1.0 / (i as f64).sqrt()))
                .set_requires_grad(true)
        };
        let blocks = (0..opts.layers)
            .map(|_| [w(h, h), w(h, h), w(h, h), w(h, h), w(h, 4 * h), w(4 * h, h)])
            .collect();
        Ok(Net::Builtin { blocks, hidden: h })
    }

    fn params(&self) -> Result<Vec<Tensor>, String> {
        match self {
            Net::Builtin { blocks, .. } => Ok(blocks
                .iter()
                .flat_map(|b| b.iter().map(Tensor::shallow_clone))
                .collect()),
            Net::Script(m) => Ok(m
                .named_parameters()
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|(_, t)| t)
                .collect()),
        }
    }

    fn input(&self, opts: &ConfirmOptions, device: Device) -> Tensor {
        let shape: Vec<i64> = match &opts.input_shape {
            Some(s) if matches!(self, Net::Script(_)) => s.0.clone(),
            _ => vec![opts.batch, opts.seq, opts.hidden],
        };
        Tensor::randn(shape.as_slice(), (Kind::Float, device))
    }

    // `x = x + ...`, not `x += ...`: on a tch Tensor `+=` adds in place, which would
    // overwrite values that autograd saved for the backward pass.
    #[allow(clippy::assign_op_pattern)]
    fn forward(&self, x: &Tensor) -> Tensor {
        match self {
            Net::Builtin { blocks, hidden } => {
                let scale = 1.0 / (*hidden as f64).sqrt();
                let norm = |t: &Tensor| t.layer_norm([*hidden], None::<Tensor>, None::<Tensor>, 1e-5, false);
                let mut x = x.shallow_clone();
                for [wq, wk, wv, wo, w1, w2] in blocks {
                    let h = norm(&x);
                    let (q, k, v) = (h.matmul(wq), h.matmul(wk), h.matmul(wv));
                    let att = (q.matmul(&k.transpose(-2, -1)) * scale).softmax(-1, Kind::Float);
                    x = x + att.matmul(&v).matmul(wo);
                    let h = norm(&x);
                    x = x + h.matmul(w1).gelu("none").matmul(w2);
                }
                x
            }
            Net::Script(m) => m
                .forward_ts(&[x])
                .unwrap_or_else(|e| panic!("the module's forward failed (it must take one tensor and return one tensor): {e}")),
        }
    }
}

fn bytes_of(ts: &[Tensor]) -> i64 {
    ts.iter()
        .map(|t| (t.numel() * t.kind().elt_size_in_bytes()) as i64)
        .sum()
}

fn run(
    scenario: Scenario,
    variant: Variant,
    opts: &ConfirmOptions,
    device: Device,
    m: &mut Measurement,
    iteration: &Cell<u32>,
) -> Result<(), String> {
    let net = Net::new(opts, device)?;
    let mut meter = Meter::new(device);
    if matches!(
        scenario,
        Scenario::LoadThenConvert | Scenario::CheckpointOnDevice
    ) {
        return run_load(scenario, variant, opts, device, net, &mut meter, m);
    }
    if scenario.iterates() {
        run_loop(
            scenario, variant, opts, device, &net, &mut meter, m, iteration,
        )
    } else {
        run_conversion(scenario, variant, device, net, &mut meter, m)
    }
}

#[allow(clippy::too_many_arguments)]
fn run_loop(
    scenario: Scenario,
    variant: Variant,
    opts: &ConfirmOptions,
    device: Device,
    net: &Net,
    meter: &mut Meter,
    m: &mut Measurement,
    iteration: &Cell<u32>,
) -> Result<(), String> {
    let flagged = variant == Variant::Flagged;
    let params = net.params()?;
    m.param_bytes = bytes_of(&params);
    let training = matches!(
        scenario,
        Scenario::KeepLoss
            | Scenario::AccumulateLoss
            | Scenario::NoZeroGrad
            | Scenario::RetainGraph
            | Scenario::PadToMaxLength
    );
    let mut opt = None;
    if training && !params.iter().any(|p| p.is_floating_point()) {
        return Err(
            "the module has no parameters to train (traced weights are constants)".to_owned(),
        );
    }
    if training {
        for p in &params {
            if p.is_floating_point() && !p.requires_grad() {
                let _ = p.set_requires_grad(true);
            }
        }
        let mut o = COptimizer::sgd(1e-4, 0.0, 0.0, 0.0, false).map_err(|e| e.to_string())?;
        for p in &params {
            o.add_parameters(p, 0).map_err(|e| e.to_string())?;
        }
        opt = Some(o);
    }
    let grad_inputs: Vec<Tensor> = if scenario == Scenario::RetainGraph {
        params.iter().map(Tensor::shallow_clone).collect()
    } else {
        Vec::new()
    };
    drop(params);
    let x = net.input(opts, device);
    // Padded to the maximum length: the same batch, four times as long.
    let x = if scenario == Scenario::PadToMaxLength && flagged {
        match net {
            Net::Builtin { .. } => Tensor::cat(&[&x, &x, &x, &x], 1),
            Net::Script(_) => {
                return Err(
                    "pad-to-max-length needs the built-in model (its sequence dimension)"
                        .to_owned(),
                )
            }
        }
    } else {
        x
    };
    // The previous step's loss, alive until the next one replaces it.
    let mut prev_loss: Option<Tensor> = None;
    // What the loop keeps across iterations, as the flagged or fixed code would.
    let mut kept: Vec<Tensor> = Vec::new();
    let mut total: Option<Tensor> = None;
    let mut total_item = 0.0f64;
    let iterations = WARMUP + opts.iterations;
    for it in 0..iterations {
        iteration.set(it);
        let measuring = it >= WARMUP;
        if it == WARMUP {
            // The last warm-up step's loss goes first: with a retained graph alive the
            // baseline would already hold one step's cost. The baseline is not taken before
            // the warm-up either: libtorch's first steps allocate lasting caches (tens of MiB
            // on the CPU) that would swamp the graph's cost in both variants alike.
            prev_loss = None;
            m.baseline_bytes = meter.begin();
        }
        let sample = |meter: &mut Meter| {
            if measuring {
                meter.sample();
            }
        };
        match scenario {
            Scenario::KeepLoss | Scenario::AccumulateLoss | Scenario::NoZeroGrad => {
                let opt = opt.as_ref().expect("training scenarios have an optimizer");
                // Gradients are reset to None each step, except where that is the bug.
                if scenario != Scenario::NoZeroGrad || !flagged {
                    opt.zero_grad().map_err(|e| e.to_string())?;
                }
                let out = net.forward(&x);
                sample(meter);
                let loss = out.square().mean(Kind::Float);
                drop(out);
                loss.backward();
                sample(meter);
                opt.step().map_err(|e| e.to_string())?;
                match (scenario, flagged) {
                    (Scenario::KeepLoss, true) => kept.push(loss),
                    (Scenario::AccumulateLoss, true) => {
                        total = Some(match total.take() {
                            None => loss,
                            Some(t) => t + loss,
                        })
                    }
                    (Scenario::NoZeroGrad, _) => {
                        m.grad_norms.push(grad_norm(net)?);
                        total_item += loss.double_value(&[]);
                    }
                    _ => total_item += loss.double_value(&[]),
                }
            }
            Scenario::RetainGraph | Scenario::PadToMaxLength => {
                let opt = opt.as_ref().expect("training scenarios have an optimizer");
                opt.zero_grad().map_err(|e| e.to_string())?;
                let out = net.forward(&x);
                let loss = out.square().mean(Kind::Float);
                drop(out);
                // The forward done, the previous step's loss is still bound (as in
                // `loss = criterion(model(x), y)`): its graph, if retained, is alive.
                sample(meter);
                if scenario == Scenario::RetainGraph {
                    // The same pass both ways; only `retain_graph` differs.
                    let grads = Tensor::run_backward(&[&loss], &grad_inputs, flagged, false);
                    drop(grads);
                } else {
                    loss.backward();
                }
                sample(meter);
                opt.step().map_err(|e| e.to_string())?;
                prev_loss = Some(loss);
            }
            Scenario::EvalOutputsOnDevice => {
                let out = tch::no_grad(|| net.forward(&x));
                sample(meter);
                if flagged {
                    kept.push(out);
                } else {
                    kept.push(out.argmax(-1, false).to_device(Device::Cpu));
                }
            }
            Scenario::KeepOutput | Scenario::AccumulateOutput | Scenario::EvalGrad => {
                let out = if scenario == Scenario::EvalGrad && !flagged {
                    tch::no_grad(|| net.forward(&x))
                } else {
                    net.forward(&x)
                };
                sample(meter);
                match (scenario, flagged) {
                    (Scenario::KeepOutput, false) => kept.push(out.detach()),
                    (Scenario::AccumulateOutput, true) => {
                        let s = out.sum(Kind::Float);
                        total = Some(match total.take() {
                            None => s,
                            Some(t) => t + s,
                        })
                    }
                    (Scenario::AccumulateOutput, false) => {
                        total_item += out.sum(Kind::Float).double_value(&[])
                    }
                    _ => kept.push(out),
                }
            }
            _ => unreachable!("conversions do not loop"),
        }
        if measuring {
            m.samples.push(meter.sample());
            if matches!(meter, Meter::Cuda) {
                m.host_samples.push(ffi::live_heap_bytes().unwrap_or(0));
            }
        }
        emit(&format!("P {}", it + 1));
    }
    m.final_bytes = meter.live();
    m.peak_bytes = meter.peak();
    std::hint::black_box((&kept, &total, total_item, &prev_loss));
    Ok(())
}

/// Loads: the weights of the built-in model (or the module's parameters), created
/// during the measured part the way the flagged or the fixed code loads them.
fn run_load(
    scenario: Scenario,
    variant: Variant,
    opts: &ConfirmOptions,
    device: Device,
    net: Net,
    meter: &mut Meter,
    m: &mut Measurement,
) -> Result<(), String> {
    let _guard = tch::no_grad_guard();
    let flagged = variant == Variant::Flagged;
    let shapes: Vec<Vec<i64>> = net.params()?.iter().map(Tensor::size).collect();
    if shapes.is_empty() {
        return Err("the module has no parameters to load".to_owned());
    }
    // Warm-up: the first allocation, conversion and copy set up pools and caches.
    let w = Tensor::ones([1024], (Kind::Float, device));
    drop((w.to_kind(Kind::Half), w.copy()));
    drop(w);
    let _ = opts;
    match scenario {
        Scenario::LoadThenConvert => {
            drop(net);
            m.baseline_bytes = meter.begin();
            let mut weights: Vec<Tensor> = Vec::new();
            for s in &shapes {
                let kind = if flagged { Kind::Float } else { Kind::Half };
                weights.push(Tensor::randn(s.as_slice(), (kind, device)));
                meter.sample();
            }
            if flagged {
                // `model.half()`: each parameter replaced by its float16 copy.
                for w in &mut weights {
                    *w = w.to_kind(Kind::Half);
                    meter.sample();
                }
            }
            m.param_bytes = bytes_of(&weights);
            m.final_bytes = meter.sample();
            m.peak_bytes = meter.peak();
            std::hint::black_box(&weights);
        }
        Scenario::CheckpointOnDevice => {
            // The checkpoint: the parameters' bytes in a file.
            let params = net.params()?;
            m.param_bytes = bytes_of(&params);
            let dir = std::env::temp_dir().join(format!("oomlint-ckpt-{}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let path = dir.join("ckpt.bin");
            let mut bytes: Vec<u8> = Vec::with_capacity(m.param_bytes as usize);
            for p in &params {
                let c = p.to_device(Device::Cpu).to_kind(Kind::Float).contiguous();
                let n = c.numel();
                let mut v = vec![0f32; n];
                c.copy_data(&mut v, n);
                for f in v {
                    bytes.extend_from_slice(&f.to_le_bytes());
                }
            }
            std::fs::write(&path, &bytes).map_err(|e| e.to_string())?;
            drop(bytes);
            m.baseline_bytes = meter.begin();
            let result = if flagged {
                // `torch.load(path)`: new tensors on the device the checkpoint names.
                // Read tensor by tensor, as the unpickler does: one buffer at a time.
                use std::io::Read;
                let mut file = std::fs::File::open(&path).map_err(|e| e.to_string())?;
                let mut loaded = Vec::new();
                for p in &params {
                    let mut buf = vec![0u8; p.numel() * 4];
                    file.read_exact(&mut buf).map_err(|e| e.to_string())?;
                    let t = Tensor::f_from_data_size(&buf, &p.size(), Kind::Float)
                        .map_err(|e| e.to_string())?
                        .to_device(device);
                    drop(buf);
                    loaded.push(t);
                    meter.sample();
                }
                for (p, t) in params.iter().zip(&loaded) {
                    let mut p = p.shallow_clone();
                    p.copy_(t);
                }
                meter.sample();
                std::hint::black_box(&loaded);
                Ok(())
            } else {
                copy_mapped(&path, &params, meter)
            };
            let _ = std::fs::remove_dir_all(&dir);
            result?;
            m.final_bytes = meter.sample();
            m.peak_bytes = meter.peak();
        }
        _ => unreachable!("only loads"),
    }
    m.samples.push(m.final_bytes);
    emit("P 1");
    Ok(())
}

/// `torch.load(path, map_location="cpu", mmap=True)` then `load_state_dict`: each
/// parameter copied from the memory-mapped file, no second copy allocated.
fn copy_mapped(path: &std::path::Path, params: &[Tensor], meter: &mut Meter) -> Result<(), String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let len = file.metadata().map_err(|e| e.to_string())?.len() as usize;
    // SAFETY: a private read-only mapping of a file this process wrote and no one
    // else changes; it is unmapped below after the tensors viewing it are dropped.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            std::os::fd::AsRawFd::as_raw_fd(&file),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err("mmap failed".to_owned());
    }
    let mut offset = 0usize;
    for p in params {
        let n = p.numel();
        let size = p.size();
        let mut strides = vec![1i64; size.len()];
        for i in (0..size.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * size[i + 1];
        }
        // SAFETY: `offset + 4 n <= len` (the file holds every parameter as float32);
        // the view is dropped before the mapping.
        let view = unsafe {
            Tensor::from_blob(
                (ptr as *const u8).add(offset),
                &size,
                &strides,
                Kind::Float,
                Device::Cpu,
            )
        };
        let mut p = p.shallow_clone();
        p.copy_(&view);
        drop(view);
        offset += 4 * n;
        meter.sample();
    }
    // SAFETY: the mapping made above; no tensor views it any more.
    unsafe {
        libc::munmap(ptr, len);
    }
    Ok(())
}

/// The norm of all gradients together (0 when none is set).
fn grad_norm(net: &Net) -> Result<f64, String> {
    let mut sq = 0.0;
    tch::no_grad(|| -> Result<(), String> {
        for p in net.params()? {
            let g = p.grad();
            if g.defined() {
                sq += g.square().sum(Kind::Double).double_value(&[]);
            }
        }
        Ok(())
    })?;
    Ok(sq.sqrt())
}

fn run_conversion(
    scenario: Scenario,
    variant: Variant,
    device: Device,
    net: Net,
    meter: &mut Meter,
    m: &mut Measurement,
) -> Result<(), String> {
    let _guard = tch::no_grad_guard();
    let flagged = variant == Variant::Flagged;
    // Warm-up: the first conversion and copy set up thread pools and caches.
    let w = Tensor::ones([1024], (Kind::Float, device));
    let warm = (
        w.to_kind(Kind::Half),
        w.to_device_(device, Kind::Float, false, true),
    );
    drop((w, warm));

    // The weights, owned here alone (a TorchScript module keeps its own).
    let (mut weights, module) = match net {
        Net::Builtin { blocks, .. } => (blocks.into_iter().flatten().collect::<Vec<_>>(), None),
        Net::Script(m) => (Vec::new(), Some(m)),
    };
    let module_params = |module: &Option<CModule>| -> Result<Vec<Tensor>, String> {
        match module {
            Some(m) => Ok(m
                .named_parameters()
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|(_, t)| t)
                .collect()),
            None => Ok(Vec::new()),
        }
    };
    for w in &mut weights {
        *w = w.detach();
    }
    let mut module = module;
    // The module's dtype, for moves that must not convert it.
    let module_kind = module_params(&module)?
        .first()
        .map_or(Kind::Float, |t| t.kind());
    if scenario == Scenario::DtypeRedundant {
        // Both variants start from weights that are already float16.
        for w in &mut weights {
            *w = w.to_kind(Kind::Half);
        }
        if let Some(md) = module.as_mut() {
            md.to(device, Kind::Half, false);
        }
    }
    m.param_bytes = bytes_of(&weights) + bytes_of(&module_params(&module)?);
    if m.param_bytes == 0 {
        return Err(
            "the module has no parameters to convert (traced weights are constants)".to_owned(),
        );
    }
    m.baseline_bytes = meter.begin();
    let mut copies: Vec<Tensor> = Vec::new();
    let mut copy_all = |ts: &[Tensor], f: &dyn Fn(&Tensor) -> Tensor, meter: &mut Meter| {
        for t in ts {
            copies.push(f(t));
            meter.sample();
        }
    };
    match (scenario, flagged) {
        (Scenario::DtypeCopy, true) => {
            let f = |t: &Tensor| t.to_kind(Kind::Half);
            copy_all(&weights, &f, meter);
            copy_all(&module_params(&module)?, &f, meter);
        }
        (Scenario::DtypeCopy, false) => {
            for w in &mut weights {
                *w = w.to_kind(Kind::Half);
                meter.sample();
            }
            if let Some(md) = module.as_mut() {
                md.to(device, Kind::Half, false);
            }
        }
        (Scenario::DtypeRedundant, true) => {
            let f = |t: &Tensor| t.to_kind(Kind::Half);
            copy_all(&weights, &f, meter);
            if let Some(md) = module.as_mut() {
                md.to(device, Kind::Half, false);
            }
        }
        (Scenario::DeviceCopy, true) => {
            let f = |t: &Tensor| t.to_device_(device, t.kind(), false, true);
            copy_all(&weights, &f, meter);
            copy_all(&module_params(&module)?, &f, meter);
        }
        (Scenario::DeviceCopy, false) | (Scenario::DeviceRedundant, true) => {
            // A move to where the weights already are: `.to()` returns them as they are.
            let f = |t: &Tensor| t.to_device(device);
            copy_all(&weights, &f, meter);
            if let Some(md) = module.as_mut() {
                md.to(device, module_kind, false);
            }
        }
        (Scenario::DtypeRedundant | Scenario::DeviceRedundant, false) => {}
        _ => unreachable!("loops are run by run_loop"),
    }
    m.final_bytes = meter.sample();
    m.samples.push(m.final_bytes);
    m.peak_bytes = meter.peak();
    emit("P 1");
    std::hint::black_box((&weights, &copies, &module));
    Ok(())
}
