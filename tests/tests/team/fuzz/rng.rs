//! The seed and the PRNG: every input comes from a seeded PRNG, so that a
//! failure's seed replays it.

/// The run's seed: `MESH_FUZZ_SEED`, else the clock.
pub(crate) fn seed() -> u64 {
    match std::env::var("MESH_FUZZ_SEED") {
        Ok(given) => {
            let given = given.trim();
            let parsed = match given.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => given.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("MESH_FUZZ_SEED={given:?} is not a u64"))
        }
        Err(_) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            nanos ^ u64::from(std::process::id()).rotate_left(32)
        }
    }
}

/// xorshift64*, seeded through splitmix64: small, fast and reproducible.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng(if z == 0 { 0x2545_F491_4F6C_DD1D } else { z })
    }

    /// A PRNG for one stream of inputs (an RPC), independent of the others.
    pub(crate) fn derived(seed: u64, label: &str) -> Self {
        // FNV-1a of the label.
        let hash = label.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        Rng::new(seed ^ hash)
    }

    pub(crate) fn u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (0 for an empty range).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.u64() % n as u64) as usize
        }
    }

    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.u64() % 100 < percent
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub(crate) fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.u64() as u8).collect()
    }
}
