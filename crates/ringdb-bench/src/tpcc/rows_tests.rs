//! Every row type encodes and decodes back to itself, field sizes as clause 4.3.3.1 draws
//! them; damaged bytes are a typed error, never a panic.

use super::codec::{Row, Text};
use super::population;
use super::random::{nurand, Constants};
use super::rows::{History, Order, OrderLine, Stock};
use super::scale::TpccScale;
use super::tables::LoadedMeta;
use rand::rngs::SmallRng;
use rand::SeedableRng;

fn round_trip<R: Row + PartialEq + std::fmt::Debug>(row: &R) {
    let bytes = row.encode();
    assert_eq!(&R::decode(&bytes).expect("decodes"), row);
    for cut in 0..bytes.len() {
        assert!(
            R::decode(&bytes[..cut]).is_err(),
            "{} cut at {cut}",
            R::TABLE
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(
        R::decode(&longer).is_err(),
        "{} with a trailing byte",
        R::TABLE
    );
}

#[test]
fn tpcc_rows_round_trip() {
    let mut rng = SmallRng::seed_from_u64(11);
    let scale = TpccScale::standard(3);
    let constants = Constants::draw(&mut rng);
    for c in [1, 999, 1_000, 1_001, 3_000] {
        let customer = population::customer(&mut rng, &constants, c, 1_700_000_000_000_000);
        assert!((300..=500).contains(&customer.data.as_bytes().len()));
        round_trip(&customer);
    }
    round_trip(&population::warehouse(&mut rng, &scale));
    round_trip(&population::district(&mut rng, &scale));
    round_trip(&population::item(&mut rng));
    let stock = population::stock(&mut rng);
    assert!(stock.dist.iter().all(|d| d.as_bytes().len() == 24));
    round_trip(&stock);
    round_trip(&population::history(&mut rng, 2, 7, 123));
    for undelivered in [false, true] {
        let order = population::order(&mut rng, 17, undelivered, 99);
        assert_eq!(order.carrier.is_none(), undelivered);
        round_trip(&order);
        round_trip(&population::order_line(&mut rng, &scale, 2, &order));
    }
    round_trip(&History {
        district: 1,
        warehouse: 1,
        date_micros: 0,
        amount_cents: -5,
        data: Text::default(),
    });
    round_trip(&Order {
        customer: 1,
        entry_micros: 1,
        carrier: Some(10),
        line_count: 15,
        all_local: false,
    });
    round_trip(&OrderLine {
        item: 100_000,
        supply_warehouse: 9,
        delivery_micros: Some(5),
        quantity: 10,
        amount_cents: 99_999,
        dist_info: Text::of(&"x".repeat(24)),
    });
    round_trip(&LoadedMeta { scale, constants });
}

#[test]
fn tpcc_a_string_longer_than_its_column_is_a_row_error() {
    let mut rng = SmallRng::seed_from_u64(5);
    let item = population::item(&mut rng);
    let mut bytes = item.encode();
    // The name (I_NAME, 24 bytes at most) follows the image id (4 bytes): its length byte.
    let name_len = usize::from(bytes[4]);
    assert_eq!(name_len, item.name.as_bytes().len());
    // 30 bytes of name: still inside the row, but longer than the column.
    bytes[4] = 30;
    let err = super::rows::Item::decode(&bytes).unwrap_err();
    assert_eq!(err.table, "ITEM");
    assert_eq!(err.what, "a string no longer than its column");
}

#[test]
fn tpcc_text_keeps_the_newest_bytes_of_a_concatenation_that_overflows() {
    let old = Text::<8>::of("abcdefgh");
    let joined = Text::<8>::concat_truncated(&[b"123", old.as_bytes()]);
    assert_eq!(joined.as_bytes(), b"123abcde");
    assert_eq!(Text::<2>::new(b"abc"), None);
    assert_eq!(Text::<3>::new(b"abc").unwrap().as_bytes(), b"abc");
    assert_eq!(format!("{:?}", Text::<4>::of("OE")), "\"OE\"");
}

#[test]
fn tpcc_nurand_stays_in_range_and_is_skewed() {
    let mut rng = SmallRng::seed_from_u64(9);
    let (x, y) = (1u32, 3_000u32);
    let mut counts = vec![0u32; (y + 1) as usize];
    let draws = 300_000;
    for _ in 0..draws {
        let v = nurand(&mut rng, 1023, 259, x, y);
        assert!((x..=y).contains(&v), "{v}");
        counts[v as usize] += 1;
    }
    let mean = f64::from(draws) / f64::from(y - x + 1);
    let max = *counts.iter().max().unwrap();
    let min = *counts[1..].iter().min().unwrap();
    // Uniform draws would put the maximum near mean + a few sigma (about 130 here); NURand's
    // OR of two draws piles values up several times the mean.
    assert!(f64::from(max) > 3.0 * mean, "max {max}, mean {mean}");
    // ... and leaves values whose low bits few draws cover far below it.
    assert!(f64::from(min) < mean / 3.0, "min {min}, mean {mean}");
    for _ in 0..10_000 {
        let v = nurand(&mut rng, 255, 100, 0, 29);
        assert!(v <= 29);
    }
}

#[test]
fn tpcc_stock_level_projections_agree_with_the_whole_row() {
    let mut rng = SmallRng::seed_from_u64(8);
    let scale = TpccScale::standard(1);
    for _ in 0..50 {
        let stock = population::stock(&mut rng);
        let bytes = stock.encode();
        assert_eq!(Stock::quantity_of(&bytes), Ok(stock.quantity));
        let order = population::order(&mut rng, 3, true, 1);
        let line = population::order_line(&mut rng, &scale, 1, &order);
        assert_eq!(OrderLine::item_of(&line.encode()), Ok(line.item));
    }
    // A row too short for the field is an error, not a panic.
    assert!(Stock::quantity_of(&[1, 2, 3]).is_err());
    assert!(OrderLine::item_of(&[]).is_err());
}
