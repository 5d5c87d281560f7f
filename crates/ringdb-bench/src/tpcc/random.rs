//! TPC-C's random values (clause 4.3.2 and 2.1.6): NURand with its C constants, last names
//! from the ten syllables, a-strings and n-strings, zip codes, and the 10% of I_DATA and
//! S_DATA that hold "ORIGINAL".
//!
//! The C constants: C_LOAD is drawn once at load and recorded with the database; a run draws
//! its own C for C_LAST whose distance from C_LOAD obeys clause 2.1.6.1 (65..=119, not 96 or
//! 112), so the names a run looks up are skewed differently from the ones the load gave out.

use rand::{Rng, RngExt};
use serde::Serialize;

/// The ten syllables of a last name (clause 4.3.2.3).
const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];
/// Alphanumeric characters for a-strings.
const ALPHANUMERIC: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// NURand's A for customer last names, customer ids and item ids.
pub const A_LAST_NAME: u32 = 255;
/// NURand's A for customer ids.
pub const A_CUSTOMER_ID: u32 = 1023;
/// NURand's A for item ids.
pub const A_ITEM_ID: u32 = 8191;

/// The C constants of NURand (clause 2.1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Constants {
    /// C for C_LAST at load (C_LOAD), 0..=255.
    pub last_name_load: u32,
    /// C for C_LAST during a run (C_RUN), 0..=255, its distance from C_LOAD valid.
    pub last_name_run: u32,
    /// C for C_ID, 0..=1023 (the same at load and run).
    pub customer_id: u32,
    /// C for OL_I_ID, 0..=8191 (the same at load and run).
    pub item_id: u32,
}

impl Constants {
    /// Constants for a new load, C_RUN drawn to match.
    pub fn draw(rng: &mut impl Rng) -> Self {
        let load = rng.random_range(0..=A_LAST_NAME);
        Constants {
            last_name_load: load,
            last_name_run: Self::run_for(load, rng),
            customer_id: rng.random_range(0..=A_CUSTOMER_ID),
            item_id: rng.random_range(0..=A_ITEM_ID),
        }
    }

    /// The loaded constants with a fresh C_RUN for a new run.
    pub fn for_run(self, rng: &mut impl Rng) -> Self {
        Constants {
            last_name_run: Self::run_for(self.last_name_load, rng),
            ..self
        }
    }

    /// A C_RUN for `load`: |C_RUN - C_LOAD| in 65..=119 and neither 96 nor 112.
    fn run_for(load: u32, rng: &mut impl Rng) -> u32 {
        let candidates: Vec<u32> = (0..=A_LAST_NAME)
            .filter(|&run| Self::valid_delta(load, run))
            .collect();
        // Every load value has some: a distance of 65..=95 fits below or above 0..=255.
        candidates[rng.random_range(0..candidates.len())]
    }

    /// Whether `run` is a valid C_RUN for `load` (clause 2.1.6.1).
    pub fn valid_delta(load: u32, run: u32) -> bool {
        let delta = load.abs_diff(run);
        (65..=119).contains(&delta) && delta != 96 && delta != 112
    }
}

/// NURand(A, x, y) with constant `c` (clause 2.1.6).
pub fn nurand(rng: &mut impl Rng, a: u32, c: u32, x: u32, y: u32) -> u32 {
    let left = rng.random_range(0..=a);
    let right = rng.random_range(x..=y);
    ((left | right).wrapping_add(c) % (y - x + 1)) + x
}

/// The last name of number `n` (0..=999): three syllables, one per decimal digit.
pub fn last_name(n: u32) -> String {
    let n = n % 1000;
    let mut name = String::with_capacity(15);
    for digit in [n / 100, (n / 10) % 10, n % 10] {
        name.push_str(SYLLABLES[digit as usize]);
    }
    name
}

/// A random a-string of `min..=max` alphanumeric characters.
pub fn a_string(rng: &mut impl Rng, min: usize, max: usize) -> String {
    let len = rng.random_range(min..=max);
    (0..len)
        .map(|_| ALPHANUMERIC[rng.random_range(0..ALPHANUMERIC.len())] as char)
        .collect()
}

/// A random n-string of `min..=max` digits.
pub fn n_string(rng: &mut impl Rng, min: usize, max: usize) -> String {
    let len = rng.random_range(min..=max);
    (0..len)
        .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
        .collect()
}

/// A zip code: four random digits and "11111".
pub fn zip(rng: &mut impl Rng) -> String {
    n_string(rng, 4, 4) + "11111"
}

/// I_DATA or S_DATA: an a-string of 26-50 characters, 10% of them with "ORIGINAL" at a
/// random position.
pub fn data_with_original(rng: &mut impl Rng) -> String {
    let mut data = a_string(rng, 26, 50);
    if rng.random_range(0..10) == 0 {
        let at = rng.random_range(0..=data.len() - 8);
        data.replace_range(at..at + 8, "ORIGINAL");
    }
    data
}

/// A tax or discount rate in ten-thousandths, uniform in `0..=max`.
pub fn rate(rng: &mut impl Rng, max: i32) -> i32 {
    rng.random_range(0..=max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn last_names_come_from_the_syllables() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
    }

    #[test]
    fn run_constants_keep_their_distance() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for _ in 0..200 {
            let c = Constants::draw(&mut rng);
            assert!(
                Constants::valid_delta(c.last_name_load, c.last_name_run),
                "{c:?}"
            );
            let again = c.for_run(&mut rng);
            assert!(Constants::valid_delta(
                again.last_name_load,
                again.last_name_run
            ));
        }
        assert!(!Constants::valid_delta(100, 196));
        assert!(!Constants::valid_delta(200, 88));
    }

    #[test]
    fn strings_have_their_lengths() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let originals = (0..2000)
            .map(|_| data_with_original(&mut rng))
            .inspect(|d| assert!((26..=50).contains(&d.len())))
            .filter(|d| d.contains("ORIGINAL"))
            .count();
        assert!((100..=300).contains(&originals), "{originals} of 2000");
        assert_eq!(zip(&mut rng).len(), 9);
        assert!(n_string(&mut rng, 16, 16)
            .bytes()
            .all(|b| b.is_ascii_digit()));
    }
}
