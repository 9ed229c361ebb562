//! The digest parsers and the streaming check against published test vectors (FIPS 180-2's
//! "abc" and 448-bit messages, RFC 4648's base64 examples) and hand-written Hub answers.

use super::hub::{file_names, lfs_digests, subfolder, tree_url};
use super::sri::{base64_decode, base64_encode, etag_sha256, hex32, parse, to_sri};
use super::*;

/// FIPS 180-2, appendix B.1: SHA-256("abc").
const ABC_256: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
/// FIPS 180-2, appendix B.2: SHA-256 of the 448-bit message below.
const MSG_448: &[u8] = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
const MSG_448_256: &str = "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
/// FIPS 180-2, appendix C.1 / D.1: SHA-512("abc"), SHA-384("abc").
const ABC_512: &str = "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a\
                       2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f";
const ABC_384: &str = "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded163\
                       1a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7";

fn hex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

fn sri_of(alg: &str, digest_hex: &str) -> String {
    format!("{alg}-{}", base64_encode(&hex(digest_hex)))
}

#[test]
fn base64_matches_rfc_4648() {
    for (plain, encoded) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64_encode(plain.as_bytes()), encoded);
        assert_eq!(base64_decode(encoded).as_deref(), Some(plain.as_bytes()), "{encoded}");
        assert_eq!(base64_decode(encoded.trim_end_matches('=')).as_deref(), Some(plain.as_bytes()));
    }
    // The URL-safe alphabet: 0xfb 0xff → "+/8=" / "-_8".
    assert_eq!(base64_decode("-_8"), Some(vec![0xfb, 0xff]));
    assert_eq!(base64_encode(&[0xfb, 0xff]), "+/8=");
    for bad in ["Zg=", "Zg===", "Z", "Zm9v!", "Zh==", "Zm9vYg=a", "Zm 9v", "AAAA==", "+_8="] {
        assert_eq!(base64_decode(bad), None, "{bad:?} must be refused");
    }
}

#[test]
fn sri_parses_the_supported_algorithms() {
    let abc = sri_of("sha256", ABC_256);
    assert_eq!(abc, "sha256-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
    let e = parse(&abc).unwrap();
    assert_eq!(
        (e.alg, e.digests.clone(), e.from),
        (Algorithm::Sha256, vec![hex(ABC_256)], Publisher::Option)
    );
    assert_eq!(to_sri(Algorithm::Sha256, &hex(ABC_256)), abc);
    assert_eq!(parse(&sri_of("sha384", ABC_384)).unwrap().alg, Algorithm::Sha384);
    // Several tokens: the strongest algorithm's digests are the ones that count.
    let two = format!("  {abc}\t{} {}\n", sri_of("sha512", ABC_512), sri_of("sha512", ABC_512));
    let e = parse(&two).unwrap();
    assert_eq!((e.alg, e.digests.len()), (Algorithm::Sha512, 2));
}

#[test]
fn sri_refuses_what_it_cannot_check() {
    let abc = sri_of("sha256", ABC_256);
    for (bad, why) in [
        ("", "no digest"),
        ("   ", "no digest"),
        ("md5-1B2M2Y8AsgTpgAmY7PhCfg==", "\"md5\" is not supported"),
        ("sha1-qZk+NkcGgWq6PiVxeFDCbJzQ2J0=", "\"sha1\" is not supported"),
        ("SHA256-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=", "\"SHA256\" is not supported"),
        ("ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=", "is not SRI"),
        ("sha256-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=?ct=x", "options"),
        ("sha256-%%%", "not base64"),
        ("sha512-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=", "64 bytes, this one 32"),
    ] {
        let err = parse(bad).unwrap_err();
        assert!(err.contains(why), "{bad:?}: {err:?} should say {why:?}");
    }
    let short = format!("sha256-{}", base64_encode(&hex(ABC_256)[..31]));
    assert!(parse(&short).unwrap_err().contains("32 bytes, this one 31"));
    // Padding may be left out (as browsers accept it).
    assert_eq!(parse(abc.trim_end_matches('=')).unwrap().digests, vec![hex(ABC_256)]);
    // One bad token spoils the value (a browser would skip it and check less).
    assert!(parse(&format!("{abc} md5-abc")).is_err());
    assert!(parse(&"sha256-".repeat(1000)).unwrap_err().contains("at most"));
}

#[test]
fn the_check_streams_in_any_pieces() {
    let want = Expected::sha256(hex(MSG_448_256).try_into().unwrap(), Publisher::HubListing);
    for split in 0..=MSG_448.len() {
        for second in split..=MSG_448.len() {
            let mut check = FileCheck::new("f", vec![want.clone()]).unwrap();
            for piece in [&MSG_448[..split], &MSG_448[split..second], &MSG_448[second..]] {
                check.update(piece).unwrap();
            }
            check.finish().unwrap_or_else(|e| panic!("split at {split}, {second}: {e}"));
        }
    }
    assert_eq!(sha256(MSG_448).to_vec(), hex(MSG_448_256));
    assert!(FileCheck::new("f", Vec::new()).is_none(), "nothing expected: nothing hashed");
}

#[test]
fn a_mismatch_is_integrity_naming_the_file_and_both_digests() {
    let right = Expected::sha256(hex(ABC_256).try_into().unwrap(), Publisher::ETag);
    let mut check = FileCheck::new("model.safetensors", vec![right.clone()]).unwrap();
    check.update(b"abd").unwrap();
    let e = check.finish().unwrap_err();
    assert_eq!(e.code(), "Integrity");
    let text = e.to_string();
    assert!(text.starts_with("model.safetensors: "), "{text}");
    assert!(text.contains(&sri_of("sha256", ABC_256)) && text.contains("ETag"), "{text}");
    // Every publisher must agree: a right SHA-256 and a wrong SHA-512 is a mismatch.
    let mut wrong_512 = parse(&sri_of("sha512", ABC_512)).unwrap();
    wrong_512.digests[0][0] ^= 1;
    let mut both = FileCheck::new("f", vec![right.clone(), wrong_512]).unwrap();
    both.update(b"abc").unwrap();
    assert!(both.finish().unwrap_err().to_string().contains("integrity option"));
    let mut both = FileCheck::new("f", vec![right, parse(&sri_of("sha512", ABC_512)).unwrap()]).unwrap();
    both.update(b"a").unwrap();
    both.update(b"bc").unwrap();
    both.finish().unwrap();
}

#[test]
fn the_head_read_first_must_be_the_streams_own() {
    let whole = b"abcdef";
    let want = Expected::sha256(sha256(whole), Publisher::Option);
    let mut same = FileCheck::new("m", vec![want.clone()]).unwrap();
    same.expect_head(3, hex(ABC_256).try_into().unwrap());
    for piece in [&whole[..2], &whole[2..5], &whole[5..]] {
        same.update(piece).unwrap();
    }
    same.finish().unwrap();
    let mut other = FileCheck::new("m", vec![want]).unwrap();
    other.expect_head(3, sha256(b"abd"));
    other.update(b"ab").unwrap();
    let e = other.update(b"cdef").unwrap_err();
    assert_eq!(e.code(), "Integrity");
    assert!(e.to_string().contains("3-byte header"), "{e}");
}

#[test]
fn hashes_computed_elsewhere_are_checked_the_same_way() {
    let want_256 = Expected::sha256(hex(ABC_256).try_into().unwrap(), Publisher::HubListing);
    let want_512 = parse(&sri_of("sha512", ABC_512)).unwrap();
    let mut check = FileCheck::new("w", vec![want_512.clone(), want_256.clone()]).unwrap();
    assert_eq!(check.hash_elsewhere(), vec![Algorithm::Sha256, Algorithm::Sha512]);
    // What the other thread computes from the same bytes (FIPS 180-2's digests).
    let mut elsewhere = Hashers::new(&[Algorithm::Sha512, Algorithm::Sha256, Algorithm::Sha512]);
    assert_eq!(elsewhere.algorithms(), vec![Algorithm::Sha256, Algorithm::Sha512]);
    for piece in [&b"a"[..], b"bc"] {
        check.update(piece).unwrap();
        elsewhere.update(piece);
    }
    let got = elsewhere.finish();
    assert_eq!(got, vec![(Algorithm::Sha256, hex(ABC_256)), (Algorithm::Sha512, hex(ABC_512))]);
    check.finish_with(&got).unwrap();
    // A wrong digest, or none for an algorithm a publisher used, is a mismatch.
    let check = || FileCheck::new("w", vec![want_256.clone(), want_512.clone()]).unwrap();
    let mut wrong = got.clone();
    wrong[1].1[0] ^= 1;
    assert_eq!(check().finish_with(&wrong).unwrap_err().code(), "Integrity");
    let e = check().finish_with(&got[..1]).unwrap_err();
    assert!(e.to_string().contains("no sha512 digest"), "{e}");
    // The head check stays with the check: a changed header fails as its bytes pass.
    let mut head = check();
    head.hash_elsewhere();
    head.expect_head(3, sha256(b"abd"));
    assert_eq!(head.update(b"abc").unwrap_err().code(), "Integrity");
}

#[test]
fn integrity_option_entries_are_checked() {
    let abc = sri_of("sha256", ABC_256);
    let ok = Integrity::parse([("model.safetensors".to_string(), abc.clone())]).unwrap();
    assert!(ok.get("model.safetensors").is_some() && ok.get("config.json").is_none());
    ok.check_names(["config.json", "model.safetensors"]).unwrap();
    let e = ok.check_names(["config.json", "model-00001-of-00002.safetensors"]).unwrap_err();
    assert!(e.code() == "InvalidInput" && e.to_string().contains("\"model.safetensors\""), "{e}");
    for name in ["", "..", "sub/model.safetensors", "a\\b", "https://x/y"] {
        let e = Integrity::parse([(name.to_string(), abc.clone())]).unwrap_err();
        assert_eq!(e.code(), "InvalidInput", "{name:?}");
    }
    let e = Integrity::parse([("config.json".to_string(), "md5-x".to_string())]).unwrap_err();
    assert!(e.to_string().contains("options.integrity[\"config.json\"]") && e.to_string().contains("md5"));
    ok.verify("model.safetensors", b"abc").unwrap();
    ok.verify("config.json", b"anything: no entry").unwrap();
    assert_eq!(ok.verify("model.safetensors", b"abcd").unwrap_err().code(), "Integrity");
    let many = (0..=MAX_INTEGRITY_ENTRIES).map(|i| (format!("f{i}"), abc.clone()));
    assert!(Integrity::parse(many).is_err());
}

#[test]
fn etags_count_only_when_they_are_sha256() {
    let quoted = format!("\"{ABC_256}\"");
    assert_eq!(etag_sha256(&quoted).map(|d| d.to_vec()), Some(hex(ABC_256)));
    assert_eq!(etag_sha256(ABC_256).map(|d| d.to_vec()), Some(hex(ABC_256)));
    assert_eq!(etag_sha256(&ABC_256.to_uppercase()).map(|d| d.to_vec()), Some(hex(ABC_256)));
    for not in [
        format!("W/\"{ABC_256}\""), // weak: no byte-for-byte promise
        "\"a9993e364706816aba3e25717850c26c9cd0d89d\"".into(), // a git blob's SHA-1 (40 digits)
        "\"1f4-18c5e2a9b10\"".into(), // a static server's size-mtime
        format!("\"{}\"", &ABC_256[..63]),
        format!("\"{}g\"", &ABC_256[..63]),
    ] {
        assert_eq!(etag_sha256(&not), None, "{not}");
    }
    assert!(hex32(&"0".repeat(64)).is_some() && hex32("+0").is_none());
}

#[test]
fn hub_layout_urls_have_a_tree_listing() {
    let cases = [
        (
            "https://huggingface.co/state-spaces/mamba-130m-hf/resolve/main/",
            Some("https://huggingface.co/api/models/state-spaces/mamba-130m-hf/tree/main"),
        ),
        (
            "https://huggingface.co/gpt2/resolve/abc123/",
            Some("https://huggingface.co/api/models/gpt2/tree/abc123"),
        ),
        (
            "http://127.0.0.1:8080/org/name/resolve/refs%2Fpr%2F1/onnx/",
            Some("http://127.0.0.1:8080/api/models/org/name/tree/refs%2Fpr%2F1/onnx"),
        ),
        ("https://huggingface.co/datasets/org/name/resolve/main/", None),
        ("https://huggingface.co/org/name/blob/main/", None),
        ("https://huggingface.co/org/name/resolve/", None),
        ("https://huggingface.co/org/name/resolve/main/../x/", None),
        ("https://example.com/models/mamba/", None),
        ("https://huggingface.co/org/name/resolve/main/?x=1/", None),
        ("file:///org/name/resolve/main/", None),
    ];
    for (base, want) in cases {
        assert_eq!(tree_url(base).as_deref(), want, "{base}");
    }
    assert_eq!(subfolder("http://h/org/name/resolve/main/onnx/fp16/"), "onnx/fp16/");
    assert_eq!(subfolder("http://h/org/name/resolve/main/"), "");
}

#[test]
fn the_tree_listing_gives_lfs_files_sha256() {
    // The shape of the Hub's answer (api/models/<repo>/tree/<rev>).
    let listing = format!(
        r#"[{{"type":"file","oid":"a9993e364706816aba3e25717850c26c9cd0d89d","size":3,"path":"config.json"}},
           {{"type":"file","oid":"0123456789012345678901234567890123456789","size":3,
             "lfs":{{"oid":"{ABC_256}","size":3,"pointerSize":134}},"path":"model.safetensors"}},
           {{"type":"directory","oid":"x","size":0,"path":"onnx"}},
           {{"type":"file","oid":"y","size":3,"lfs":{{"oid":"{ABC_256}"}},"path":"onnx/model.onnx"}},
           {{"type":"file","path":"bad.safetensors","lfs":{{"oid":"not-hex"}}}},
           {{"unexpected":true}}, 5]"#
    );
    let got = lfs_digests(listing.as_bytes(), "").unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got["model.safetensors"].to_vec(), hex(ABC_256));
    let sub = lfs_digests(listing.as_bytes(), "onnx/").unwrap();
    assert_eq!(sub.keys().collect::<Vec<_>>(), ["model.onnx"]);
    assert!(lfs_digests(b"{\"error\":\"not found\"}", "").is_err());
    assert!(lfs_digests(b"<html>", "").is_err());
    // Every file of the folder itself, LFS or not (a GGUF file is chosen among them).
    assert_eq!(
        file_names(listing.as_bytes(), "").unwrap(),
        ["config.json", "model.safetensors", "bad.safetensors"]
    );
    assert_eq!(file_names(listing.as_bytes(), "onnx/").unwrap(), ["model.onnx"]);
}
