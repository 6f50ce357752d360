//! Probe: parse a dump and print its totals and timing.
fn main() {
    if let Ok(n) = std::env::var("REPEAT") {
        let path = std::env::args().nth(1).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let t = std::time::Instant::now();
        for _ in 0..n.parse::<usize>().unwrap() {
            std::hint::black_box(jeprof_dumpfmt::read::parse(&bytes).unwrap());
        }
        println!("{:?} per parse", t.elapsed() / n.parse::<u32>().unwrap());
        return;
    }
    for path in std::env::args().skip(1) {
        let t = std::time::Instant::now();
        match jeprof_dumpfmt::read::read_file(&path) {
            Ok(p) => {
                let tot = p.totals();
                println!("{path}: R={} stacks={} threads={} inuse {:.1} B {:.2} obj; accum {:.1} B; {:?}",
                    p.sample_period, p.stacks.len(), p.threads.len(), tot.inuse.bytes, tot.inuse.objects, tot.accum.bytes, t.elapsed());
            }
            Err(e) => println!("error: {e}"),
        }
    }
}
