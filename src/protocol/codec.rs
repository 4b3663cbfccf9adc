//! Server-side packet payloads: OK, EOF, ERR, result-set headers, text and binary rows.
//! Pure functions over byte buffers.

use mysql_common::constants::{ColumnType, StatusFlags};
use mysql_common::io::WriteMysqlExt;
use mysql_common::packets::{Column, ErrPacket, ServerError, SqlState};
use mysql_common::proto::MySerialize;
use mysql_common::value::Value;

/// An OK packet (protocol 4.1).
pub fn ok(
    affected: u64,
    last_insert_id: u64,
    status: StatusFlags,
    warnings: u16,
    info: &str,
) -> Vec<u8> {
    let mut b = Vec::with_capacity(16 + info.len());
    b.push(0x00);
    b.write_lenenc_int(affected).ok();
    b.write_lenenc_int(last_insert_id).ok();
    b.extend_from_slice(&status.bits().to_le_bytes());
    b.extend_from_slice(&warnings.to_le_bytes());
    if !info.is_empty() {
        // Servers send the message length-encoded, and clients (libmariadb) read it so.
        b.write_lenenc_str(info.as_bytes()).ok();
    }
    b
}

/// An EOF packet (protocol 4.1).
pub fn eof(status: StatusFlags, warnings: u16) -> Vec<u8> {
    let mut b = Vec::with_capacity(5);
    b.push(0xFE);
    b.extend_from_slice(&warnings.to_le_bytes());
    b.extend_from_slice(&status.bits().to_le_bytes());
    b
}

/// An ERR packet with SQLSTATE.
pub fn err(code: u16, state: &str, message: &str) -> Vec<u8> {
    let mut st = [b'H', b'Y', b'0', b'0', b'0'];
    if state.len() == 5 {
        st.copy_from_slice(state.as_bytes());
    }
    let packet = ErrPacket::Error(ServerError::new(
        code,
        Some(SqlState::new(st)),
        message.as_bytes(),
    ));
    let mut b = Vec::with_capacity(9 + message.len());
    packet.serialize(&mut b);
    b
}

pub use crate::error::sqlstate_of;

pub fn column_count(n: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(9);
    b.write_lenenc_int(n as u64).ok();
    b
}

/// A column definition (Protocol::ColumnDefinition41) exactly as the backend described it.
///
/// Written by hand: mysql_common 0.37's `Column::serialize` puts the 4-byte length before the
/// 2-byte character set, the reverse of the wire order its own deserializer reads.
pub fn column_def(c: &Column) -> Vec<u8> {
    let mut b = Vec::with_capacity(64);
    b.write_lenenc_str(b"def").ok();
    for part in [
        c.schema_ref(),
        c.table_ref(),
        c.org_table_ref(),
        c.name_ref(),
        c.org_name_ref(),
    ] {
        b.write_lenenc_str(part).ok();
    }
    b.push(0x0C);
    b.extend_from_slice(&c.character_set().to_le_bytes());
    b.extend_from_slice(&c.column_length().to_le_bytes());
    b.push(c.column_type() as u8);
    b.extend_from_slice(&c.flags().bits().to_le_bytes());
    b.push(c.decimals());
    b.extend_from_slice(&[0, 0]);
    b
}

/// A text-protocol row: each value its text, NULL as 0xFB.
pub fn text_row(values: &[Option<Value>], out: &mut Vec<u8>) {
    for v in values {
        match v {
            None | Some(Value::NULL) => out.push(0xFB),
            Some(Value::Bytes(bytes)) => {
                out.write_lenenc_str(bytes).ok();
            }
            Some(other) => {
                let text = crate::value::text_form(other).unwrap_or_default();
                out.write_lenenc_str(&text).ok();
            }
        }
    }
}

/// A binary-protocol row: null bitmap (offset 2), then each value in the form its column type
/// prescribes.
pub fn binary_row(values: &[Option<Value>], columns: &[Column], out: &mut Vec<u8>) {
    out.push(0x00);
    let bitmap_at = out.len();
    out.resize(bitmap_at + (values.len() + 7 + 2) / 8, 0);
    for (i, v) in values.iter().enumerate() {
        let ty = columns
            .get(i)
            .map(|c| c.column_type())
            .unwrap_or(ColumnType::MYSQL_TYPE_VAR_STRING);
        match v {
            None | Some(Value::NULL) => {
                let bit = i + 2;
                out[bitmap_at + bit / 8] |= 1 << (bit % 8);
            }
            Some(value) => binary_value(value, ty, out),
        }
    }
}

fn binary_value(v: &Value, ty: ColumnType, out: &mut Vec<u8>) {
    use ColumnType::*;
    let int = |v: &Value| -> Option<i128> {
        match v {
            Value::Int(i) => Some(i128::from(*i)),
            Value::UInt(u) => Some(i128::from(*u)),
            Value::Bytes(b) => std::str::from_utf8(b).ok()?.trim().parse().ok(),
            _ => None,
        }
    };
    match ty {
        MYSQL_TYPE_TINY | MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR | MYSQL_TYPE_INT24
        | MYSQL_TYPE_LONG | MYSQL_TYPE_LONGLONG => {
            let i = int(v).unwrap_or_default();
            match ty {
                MYSQL_TYPE_TINY => out.push(i as u8),
                MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR => {
                    out.extend_from_slice(&(i as u16).to_le_bytes())
                }
                MYSQL_TYPE_INT24 | MYSQL_TYPE_LONG => {
                    out.extend_from_slice(&(i as u32).to_le_bytes())
                }
                _ => out.extend_from_slice(&(i as u64).to_le_bytes()),
            }
        }
        MYSQL_TYPE_FLOAT => {
            let f = match v {
                Value::Float(f) => *f,
                Value::Double(d) => *d as f32,
                Value::Int(i) => *i as f32,
                Value::UInt(u) => *u as f32,
                Value::Bytes(b) => std::str::from_utf8(b)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_default(),
                _ => 0.0,
            };
            out.extend_from_slice(&f.to_le_bytes());
        }
        MYSQL_TYPE_DOUBLE => {
            let d = match v {
                Value::Double(d) => *d,
                Value::Float(f) => f64::from(*f),
                Value::Int(i) => *i as f64,
                Value::UInt(u) => *u as f64,
                Value::Bytes(b) => std::str::from_utf8(b)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_default(),
                _ => 0.0,
            };
            out.extend_from_slice(&d.to_le_bytes());
        }
        ty if crate::merge::value::is_temporal(ty)
            && matches!(v, Value::Date(..) | Value::Time(..)) =>
        {
            v.serialize(out)
        }
        _ => match v {
            Value::Bytes(b) => {
                out.write_lenenc_str(b).ok();
            }
            other => {
                let text = crate::value::text_form(other).unwrap_or_default();
                out.write_lenenc_str(&text).ok();
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mysql_common::constants::ColumnFlags;

    #[test]
    fn ok_and_eof_layout() {
        let p = ok(3, 7, StatusFlags::SERVER_STATUS_AUTOCOMMIT, 1, "");
        assert_eq!(p, vec![0x00, 3, 7, 0x02, 0x00, 0x01, 0x00]);
        assert_eq!(
            eof(StatusFlags::SERVER_STATUS_AUTOCOMMIT, 0),
            vec![0xFE, 0, 0, 2, 0]
        );
        let p = ok(2, 0, StatusFlags::empty(), 0, "Records: 2");
        assert_eq!(&p[7..], b"\x0aRecords: 2");
    }

    #[test]
    fn err_carries_code_and_state() {
        let p = err(1045, "28000", "Access denied");
        assert_eq!(&p[..3], &[0xFF, 0x15, 0x04]);
        assert_eq!(&p[3..9], b"#28000");
        assert_eq!(&p[9..], b"Access denied");
    }

    #[test]
    fn column_definitions_round_trip_in_wire_order() {
        let c = Column::new(ColumnType::MYSQL_TYPE_BLOB)
            .with_schema(b"shop")
            .with_table(b"t")
            .with_org_table(b"t")
            .with_name(b"data")
            .with_org_name(b"data")
            .with_character_set(63)
            .with_column_length(65535)
            .with_flags(ColumnFlags::BLOB_FLAG | ColumnFlags::BINARY_FLAG)
            .with_decimals(0);
        let bytes = column_def(&c);
        let back: Column = mysql_common::io::ParseBuf(&bytes).parse(()).unwrap();
        assert_eq!(back.character_set(), 63);
        assert_eq!(back.column_length(), 65535);
        assert_eq!(back.column_type(), ColumnType::MYSQL_TYPE_BLOB);
        assert_eq!(back.name_ref(), b"data");
        assert_eq!(back.schema_ref(), b"shop");
        assert_eq!(
            back.flags(),
            ColumnFlags::BLOB_FLAG | ColumnFlags::BINARY_FLAG
        );
    }

    #[test]
    fn text_rows_encode_nulls() {
        let mut b = Vec::new();
        text_row(
            &[Some(Value::Bytes(b"ab".to_vec())), None, Some(Value::NULL)],
            &mut b,
        );
        assert_eq!(b, vec![2, b'a', b'b', 0xFB, 0xFB]);
    }

    #[test]
    fn binary_rows_follow_column_types() {
        let cols = vec![
            Column::new(ColumnType::MYSQL_TYPE_TINY),
            Column::new(ColumnType::MYSQL_TYPE_LONG).with_flags(ColumnFlags::UNSIGNED_FLAG),
            Column::new(ColumnType::MYSQL_TYPE_VAR_STRING),
            Column::new(ColumnType::MYSQL_TYPE_LONGLONG),
        ];
        let mut b = Vec::new();
        binary_row(
            &[
                Some(Value::Int(-1)),
                Some(Value::UInt(7)),
                None,
                Some(Value::Int(5)),
            ],
            &cols,
            &mut b,
        );
        // header, bitmap (NULL at column 2 -> bit 4), tiny, long, longlong
        assert_eq!(b[0], 0);
        assert_eq!(b[1], 0b0001_0000);
        assert_eq!(&b[2..3], &[0xFF]);
        assert_eq!(&b[3..7], &[7, 0, 0, 0]);
        assert_eq!(&b[7..15], &[5, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(b.len(), 15);
    }
}
