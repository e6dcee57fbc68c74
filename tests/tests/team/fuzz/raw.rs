//! A codec that sends and takes raw bytes, and one raw call with it.

use bytes::{Buf, BufMut, Bytes};
use http::uri::PathAndQuery;
use tonic::{
    client::Grpc,
    codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
    transport::Channel,
    Status,
};

use crate::fuzz::schema::Rpc;

#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

#[derive(Debug)]
struct RawEncoder;

#[derive(Debug)]
struct RawDecoder;

impl Encoder for RawEncoder {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }

    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

/// One raw call: `body` as the request message of `rpc`, with `token`. For a
/// server stream, the answer is its headers' status; the stream is dropped.
pub(crate) async fn raw_call(
    grpc: &mut Grpc<Channel>,
    rpc: &Rpc,
    token: &str,
    body: Bytes,
) -> Result<(), Status> {
    let path: PathAndQuery = rpc.path.parse().expect("a path");
    let mut request = tonic::Request::new(body);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("a header value"),
    );
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(format!("the channel is not ready: {e}")))?;
    if rpc.server_streaming {
        grpc.server_streaming(request, path, RawCodec)
            .await
            .map(drop)
    } else {
        grpc.unary(request, path, RawCodec).await.map(drop)
    }
}
