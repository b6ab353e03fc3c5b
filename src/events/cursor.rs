//! Event ids: `evt_` and the event's feed position (its transaction, then its number) as 32
//! hexadecimal digits, so ids sort as text in feed order and a cursor carries its own position.

/// A place in the feed: `(transaction id, event id)`, compared in that order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Position {
    pub xid: i64,
    pub id: i64,
}

const PREFIX: &str = "evt_";

impl Position {
    pub fn to_event_id(self) -> String {
        format!("{PREFIX}{:016x}{:016x}", self.xid, self.id)
    }

    /// The position an event id names; `None` for anything that is not one.
    pub fn parse(raw: &str) -> Option<Position> {
        let hex = raw.strip_prefix(PREFIX)?;
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return None;
        }
        let xid = i64::from_str_radix(&hex[..16], 16).ok()?;
        let id = i64::from_str_radix(&hex[16..], 16).ok()?;
        (xid >= 0 && id >= 0).then_some(Position { xid, id })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ids_round_trip_and_reject_anything_else() {
        let p = Position { xid: 0x1234, id: 77 };
        assert_eq!(p.to_event_id(), "evt_0000000000001234000000000000004d");
        assert_eq!(Position::parse(&p.to_event_id()), Some(p));
        for bad in ["", "evt_", "evt_xyz", "evt_0000000000001234000000000000004D", "abc_0000000000001234000000000000004d", "evt_0000000000001234000000000000004", "evt_8000000000000000000000000000004d"] {
            assert_eq!(Position::parse(bad), None, "{bad}");
        }
    }

    proptest! {
        #[test]
        fn text_order_is_feed_order(a in (0..i64::MAX, 0..i64::MAX), b in (0..i64::MAX, 0..i64::MAX)) {
            let (pa, pb) = (Position { xid: a.0, id: a.1 }, Position { xid: b.0, id: b.1 });
            prop_assert_eq!(pa.to_event_id().cmp(&pb.to_event_id()), pa.cmp(&pb));
        }
    }
}
