#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shardproxy_fuzz::plan(data));
