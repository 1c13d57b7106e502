//! What the tests and benchmarks share (feature `testing`, and this crate's own tests):
//! nothing here runs in a function.

/// A xorshift generator: the same values on every run from the same seed (not zero).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// The next value below `n` (not zero).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_values_every_run() {
        let values = |seed| {
            let mut rng = Rng(seed);
            (0..3).map(|_| rng.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(values(1), [1082269761, 1152992998833853505, 11177516664432764457]);
        assert!(Rng(7).below(10) < 10);
    }
}
