//! The protobuf messages of `osmformat.proto` as prost derives them, written
//! out by hand so the build needs no protoc and no codegen step: the oracle
//! of pbf-format's tests, an independent decoder and encoder that the codec
//! must agree with (it reads what these messages would and writes what
//! prost writes for them). The block codec and the key scan read and write
//! the wire format by hand; nothing outside the tests uses these. The crate's
//! unit tests include this file as `crate::proto`, `tests/codec.rs` as a
//! module of its own.
#![allow(missing_docs, dead_code)]

// `fileformat.proto` BlobHeader and Blob are read and written by hand
// (`crate::frame`, `crate::compress`): a frame is never decoded whole.
// `osmformat.proto` HeaderBlock and HeaderBBox are `crate::header::Header`
// and `crate::header::BBox`: the message is the decoded header.

#[derive(Clone, PartialEq, prost::Message)]
pub struct PrimitiveBlock {
    #[prost(message, required, tag = "1")]
    pub stringtable: StringTable,
    #[prost(message, repeated, tag = "2")]
    pub primitivegroup: Vec<PrimitiveGroup>,
    #[prost(int32, optional, tag = "17")]
    pub granularity: Option<i32>,
    #[prost(int32, optional, tag = "18")]
    pub date_granularity: Option<i32>,
    #[prost(int64, optional, tag = "19")]
    pub lat_offset: Option<i64>,
    #[prost(int64, optional, tag = "20")]
    pub lon_offset: Option<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StringTable {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub s: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PrimitiveGroup {
    #[prost(message, repeated, tag = "1")]
    pub nodes: Vec<Node>,
    #[prost(message, optional, tag = "2")]
    pub dense: Option<DenseNodes>,
    #[prost(message, repeated, tag = "3")]
    pub ways: Vec<Way>,
    #[prost(message, repeated, tag = "4")]
    pub relations: Vec<Relation>,
    #[prost(message, repeated, tag = "5")]
    pub changesets: Vec<ChangeSet>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Info {
    #[prost(int32, optional, tag = "1")]
    pub version: Option<i32>,
    #[prost(int64, optional, tag = "2")]
    pub timestamp: Option<i64>,
    #[prost(int64, optional, tag = "3")]
    pub changeset: Option<i64>,
    #[prost(int32, optional, tag = "4")]
    pub uid: Option<i32>,
    #[prost(uint32, optional, tag = "5")]
    pub user_sid: Option<u32>,
    #[prost(bool, optional, tag = "6")]
    pub visible: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DenseInfo {
    #[prost(int32, repeated, packed = "true", tag = "1")]
    pub version: Vec<i32>,
    #[prost(sint64, repeated, packed = "true", tag = "2")]
    pub timestamp: Vec<i64>,
    #[prost(sint64, repeated, packed = "true", tag = "3")]
    pub changeset: Vec<i64>,
    #[prost(sint32, repeated, packed = "true", tag = "4")]
    pub uid: Vec<i32>,
    #[prost(sint32, repeated, packed = "true", tag = "5")]
    pub user_sid: Vec<i32>,
    #[prost(bool, repeated, packed = "true", tag = "6")]
    pub visible: Vec<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ChangeSet {
    #[prost(int64, required, tag = "1")]
    pub id: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Node {
    #[prost(sint64, required, tag = "1")]
    pub id: i64,
    #[prost(uint32, repeated, packed = "true", tag = "2")]
    pub keys: Vec<u32>,
    #[prost(uint32, repeated, packed = "true", tag = "3")]
    pub vals: Vec<u32>,
    #[prost(message, optional, tag = "4")]
    pub info: Option<Info>,
    #[prost(sint64, required, tag = "8")]
    pub lat: i64,
    #[prost(sint64, required, tag = "9")]
    pub lon: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DenseNodes {
    #[prost(sint64, repeated, packed = "true", tag = "1")]
    pub id: Vec<i64>,
    #[prost(message, optional, tag = "5")]
    pub denseinfo: Option<DenseInfo>,
    #[prost(sint64, repeated, packed = "true", tag = "8")]
    pub lat: Vec<i64>,
    #[prost(sint64, repeated, packed = "true", tag = "9")]
    pub lon: Vec<i64>,
    #[prost(int32, repeated, packed = "true", tag = "10")]
    pub keys_vals: Vec<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Way {
    #[prost(int64, required, tag = "1")]
    pub id: i64,
    #[prost(uint32, repeated, packed = "true", tag = "2")]
    pub keys: Vec<u32>,
    #[prost(uint32, repeated, packed = "true", tag = "3")]
    pub vals: Vec<u32>,
    #[prost(message, optional, tag = "4")]
    pub info: Option<Info>,
    #[prost(sint64, repeated, packed = "true", tag = "8")]
    pub refs: Vec<i64>,
    #[prost(sint64, repeated, packed = "true", tag = "9")]
    pub lat: Vec<i64>,
    #[prost(sint64, repeated, packed = "true", tag = "10")]
    pub lon: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Relation {
    #[prost(int64, required, tag = "1")]
    pub id: i64,
    #[prost(uint32, repeated, packed = "true", tag = "2")]
    pub keys: Vec<u32>,
    #[prost(uint32, repeated, packed = "true", tag = "3")]
    pub vals: Vec<u32>,
    #[prost(message, optional, tag = "4")]
    pub info: Option<Info>,
    #[prost(int32, repeated, packed = "true", tag = "8")]
    pub roles_sid: Vec<i32>,
    #[prost(sint64, repeated, packed = "true", tag = "9")]
    pub memids: Vec<i64>,
    #[prost(int32, repeated, packed = "true", tag = "10")]
    pub types: Vec<i32>,
}
