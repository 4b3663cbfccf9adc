//! MySQL packet framing on a socket, either side of the proxy (the clients' and the nodes'):
//! 3-byte length + sequence id, payloads of 16 MiB and more split into several packets.
//! Writes are buffered so a small request or response leaves in one syscall.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

const MAX_PAYLOAD: usize = 0xFF_FFFF;
/// Flush the write buffer past this size while streaming a result set.
const FLUSH_AT: usize = 64 * 1024;

pub struct PacketIo<S> {
    stream: BufReader<S>,
    out: Vec<u8>,
    seq: u8,
    /// Largest request accepted (max_allowed_packet).
    max_request: usize,
    /// Packets written so far (to tell whether a response has begun).
    packets: u64,
}

/// The read buffer of a node connection: result sets stream through it.
const NODE_READ_BUF: usize = 16 * 1024;
/// The read buffer of a client connection: requests are small (a larger packet is read past
/// the buffer), and thousands of idle clients each hold one.
pub const CLIENT_READ_BUF: usize = 2 * 1024;
/// What the write buffer keeps between commands (`PacketIo::idle`).
const IDLE_OUT: usize = 2 * 1024;

impl<S: AsyncRead + AsyncWrite + Unpin> PacketIo<S> {
    pub fn new(stream: S, max_request: usize) -> Self {
        Self::with_read_buffer(stream, max_request, NODE_READ_BUF)
    }

    pub fn with_read_buffer(stream: S, max_request: usize, read_buf: usize) -> Self {
        PacketIo {
            stream: BufReader::with_capacity(read_buf, stream),
            out: Vec::with_capacity(IDLE_OUT),
            seq: 0,
            max_request,
            packets: 0,
        }
    }

    /// Between commands: a write buffer grown by a large result goes back to its idle size,
    /// so an idle client costs little memory.
    pub fn idle(&mut self) {
        if self.out.is_empty() && self.out.capacity() > 4 * IDLE_OUT {
            self.out = Vec::with_capacity(IDLE_OUT);
        }
    }

    /// Reads one logical packet; `Ok(None)` on a clean end of stream.
    pub async fn read(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut payload = Vec::new();
        Ok(self.read_into(&mut payload).await?.then_some(payload))
    }

    /// Reads one logical packet into `payload` (replacing what it held, keeping its
    /// allocation); `Ok(false)` on a clean end of stream.
    pub async fn read_into(&mut self, payload: &mut Vec<u8>) -> io::Result<bool> {
        payload.clear();
        loop {
            let mut header = [0u8; 4];
            match self.stream.read_exact(&mut header).await {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && payload.is_empty() => {
                    return Ok(false)
                }
                Err(e) => return Err(e),
            }
            let len =
                usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
            self.seq = header[3].wrapping_add(1);
            if payload.len() + len > self.max_request {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "packet larger than max_allowed_packet ({} bytes)",
                        self.max_request
                    ),
                ));
            }
            // Memory follows the bytes that arrive, not the length a header claims: a peer
            // that announces 16 MiB and sends nothing holds no 16 MiB buffer.
            let start = payload.len();
            payload.reserve(len.min(16 * 1024));
            let got = (&mut self.stream)
                .take(len as u64)
                .read_to_end(payload)
                .await?;
            if got < len {
                payload.truncate(start);
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            if len < MAX_PAYLOAD {
                return Ok(true);
            }
        }
    }

    /// Sets the sequence id of the next packet written (0 starts a new exchange).
    pub fn set_seq(&mut self, seq: u8) {
        self.seq = seq;
    }

    /// Appends one packet (split if needed) to the write buffer.
    pub fn write(&mut self, payload: &[u8]) {
        let mut chunks = payload.chunks(MAX_PAYLOAD);
        let mut last_len = 0;
        for chunk in chunks.by_ref() {
            self.header(chunk.len());
            self.out.extend_from_slice(chunk);
            last_len = chunk.len();
        }
        if payload.is_empty() || last_len == MAX_PAYLOAD {
            self.header(0);
        }
    }

    /// Packets written so far: unchanged across a failed attempt means the client saw nothing
    /// of it.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    fn header(&mut self, len: usize) {
        self.packets += 1;
        let l = len as u32;
        self.out
            .extend_from_slice(&[l as u8, (l >> 8) as u8, (l >> 16) as u8, self.seq]);
        self.seq = self.seq.wrapping_add(1);
    }

    /// Builds a packet in place with `f` (avoids a copy for rows).
    pub fn write_with(&mut self, f: impl FnOnce(&mut Vec<u8>)) {
        let at = self.out.len();
        self.out.extend_from_slice(&[0, 0, 0, 0]);
        f(&mut self.out);
        let len = self.out.len() - at - 4;
        if len >= MAX_PAYLOAD {
            let payload = self.out.split_off(at + 4);
            self.out.truncate(at);
            self.write(&payload);
            return;
        }
        let l = len as u32;
        self.packets += 1;
        self.out[at..at + 4].copy_from_slice(&[l as u8, (l >> 8) as u8, (l >> 16) as u8, self.seq]);
        self.seq = self.seq.wrapping_add(1);
    }

    /// Flushes when the buffer has grown large (while streaming rows).
    pub async fn maybe_flush(&mut self) -> io::Result<()> {
        if self.out.len() >= FLUSH_AT {
            self.flush().await?;
        }
        Ok(())
    }

    pub async fn flush(&mut self) -> io::Result<()> {
        if !self.out.is_empty() {
            self.stream.get_mut().write_all(&self.out).await?;
            self.out.clear();
            if self.out.capacity() > 1 << 20 {
                self.out.shrink_to(16 * 1024);
            }
        }
        Ok(())
    }

    pub fn get_ref(&self) -> &S {
        self.stream.get_ref()
    }

    /// Bytes were read from the stream that no packet has consumed yet.
    pub fn has_buffered(&self) -> bool {
        !self.stream.buffer().is_empty()
    }

    pub fn get_mut(&mut self) -> &mut S {
        self.stream.get_mut()
    }

    /// The stream and the bytes already read from it but not yet consumed (for a TLS upgrade:
    /// a client sends its TLS hello right after the SSLRequest).
    pub fn into_parts(self) -> (S, Vec<u8>) {
        let buffered = self.stream.buffer().to_vec();
        (self.stream.into_inner(), buffered)
    }

    /// The sequence id the next packet written will carry.
    pub fn seq(&self) -> u8 {
        self.seq
    }

    /// The largest request accepted (what a replacing `PacketIo` keeps, after a TLS upgrade).
    pub fn max_request(&self) -> usize {
        self.max_request
    }

    /// Changes the largest request accepted (a client's limit grows once it has logged in).
    pub fn set_max_request(&mut self, max: usize) {
        self.max_request = max;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn round_trip_small_and_split_packets() {
        let (a, b) = tokio::io::duplex(1 << 20);
        let mut w = PacketIo::new(a, 64 << 20);
        let mut r = PacketIo::new(b, 64 << 20);
        let big = vec![7u8; MAX_PAYLOAD + 10];
        let sent = big.clone();
        let writer = tokio::spawn(async move {
            w.set_seq(0);
            w.write(b"hello");
            w.write(&sent);
            w.write_with(|b| b.extend_from_slice(b"row"));
            w.flush().await.unwrap();
            w
        });
        assert_eq!(r.read().await.unwrap().unwrap(), b"hello");
        assert_eq!(r.read().await.unwrap().unwrap(), big);
        assert_eq!(r.read().await.unwrap().unwrap(), b"row");
        writer.await.unwrap();
    }

    #[tokio::test]
    async fn oversized_request_is_an_error() {
        let (a, b) = tokio::io::duplex(1 << 16);
        let mut w = PacketIo::new(a, 1 << 20);
        let mut r = PacketIo::new(b, 8);
        w.write(b"0123456789");
        w.flush().await.unwrap();
        assert!(r.read().await.is_err());
    }
}
