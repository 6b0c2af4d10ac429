"""The allow-list: how crew.yaml's entries, a provider's hosts and a base URL are read, what a host
is compared as, and which addresses a name may never lead to."""

from __future__ import annotations

import ipaddress

import pytest

from crewbridge.sandbox.allowlist import AllowList, Entry, canonical_host, entry, forbidden, from_url, split_authority


@pytest.mark.parametrize(
    ("text", "host", "ports"),
    [
        ("example.com", "example.com", ()),
        ("Example.COM.", "example.com", ()),
        ("example.com:8443", "example.com", (8443,)),
        ("*.example.com", "*.example.com", ()),
        ("*.example.com:443", "*.example.com", (443,)),
        ("10.0.0.5:5432", "10.0.0.5", (5432,)),
        ("[::1]:8080", "::1", (8080,)),
        ("[::ffff:127.0.0.1]:8080", "127.0.0.1", (8080,)),  # an IPv4-mapped address is its IPv4 one
        ("::1", "::1", ()),
        ("under_score.internal", "under_score.internal", ()),
    ],
)
def test_an_entry_is_a_host_and_its_ports(text, host, ports):
    written = entry(text)
    assert (written.host, written.ports) == (host, ports)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "example.com:0",
        "example.com:65536",
        "example.com:+80",
        "example.com:\uff18\uff10",  # fullwidth digits: digits of another script
        "exa mple.com",
        "-bad.example.com",
        "example..com",
        "http://example.com",
        "[::1",
        "[::1]x",
        "[not-v6]:80",
        "*.",
        "a" * 64 + ".com",
        "b." * 130 + "com",
        "ëxample.com",  # IDNA is written in its ASCII form
        "2130706433",  # 127.0.0.1 as one number
        "0177.0.0.1",  # octal
        "0x7f.0.0.1",  # hexadecimal
        "127.1",  # a short form
        "*.1",
    ],
)
def test_what_is_not_a_host_is_refused_saying_how_to_write_one(text):
    with pytest.raises(ValueError, match="write a host"):
        entry(text)


@pytest.mark.parametrize("text", ["2130706433", "0177.0.0.1", "0x7f.1", "127.1", "1.2.3.4.5", "017700000001"])
def test_a_host_whose_last_label_is_a_number_must_be_a_plain_ipv4_address(text):
    """Resolvers read these as addresses (127.0.0.1 among them) that no list names by that spelling."""
    with pytest.raises(ValueError, match="plain IPv4"):
        canonical_host(text)
    assert canonical_host("127.0.0.1") == "127.0.0.1"
    assert canonical_host("version2.example.com") == "version2.example.com"  # a number inside a label is a name


def test_an_authority_is_split_strictly():
    assert split_authority("Example.com:443") == ("example.com", 443)
    assert split_authority("[::1]:8080") == ("::1", 8080)
    assert split_authority("[::ffff:127.0.0.1]:80") == ("127.0.0.1", 80)
    for bad in ("example.com", ":443", "::1:443", "example.com:", "example.com:443:1", "[::1]", "a b:1"):
        with pytest.raises(ValueError):
            split_authority(bad)


def test_an_entry_without_a_port_allows_https_and_http_only():
    written = entry("example.com")
    assert written.matches("example.com", 443) and written.matches("example.com", 80)
    assert not written.matches("example.com", 22)
    assert entry("example.com:22").matches("example.com", 22)
    assert not entry("example.com:22").matches("example.com", 443)


def test_a_wildcard_matches_the_names_below_its_domain_not_the_domain_nor_a_lookalike():
    wildcard = entry("*.example.com")
    assert wildcard.matches("api.example.com", 443) and wildcard.matches("a.b.example.com", 443)
    assert not wildcard.matches("example.com", 443)
    assert not wildcard.matches("evilexample.com", 443)
    assert not wildcard.private_ok  # never into the machine or its network


def test_an_exact_entry_comes_before_a_wildcard():
    listed = AllowList((entry("*.example.com"), entry("db.example.com")))
    found = listed.find("db.example.com", 443)
    assert found is not None and not found.wildcard
    assert listed.find("other.org", 443) is None


def test_a_base_url_is_its_host_and_the_port_it_names_or_its_schemes():
    assert from_url("http://127.0.0.1:8080/v1", "X") == Entry("127.0.0.1", (8080,), "X", private_ok=True)
    assert from_url("https://gw.corp.example/v1", "X") == Entry("gw.corp.example", (443,), "X", private_ok=True)
    assert from_url("http://[::1]/", "X") == Entry("::1", (80,), "X", private_ok=True)
    assert from_url("http://LOCALHOST:7/", "X") == Entry("localhost", (7,), "X", private_ok=True)
    for bad in ("", "not a url", "ftp://example.com/", "http://", "http://a:99999/", "http://2130706433/"):
        assert from_url(bad, "X") is None


def test_the_loopback_destinations_named_exactly_are_carried():
    listed = AllowList((entry("127.0.0.1:8080"), entry("localhost:9"), entry("example.com"), entry("[::1]:7")))
    assert listed.loopback() == [("127.0.0.1", 8080), ("localhost", 9), ("::1", 7)]


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("169.254.169.254", "link-local"),  # the cloud metadata service
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("100.64.0.1", "not public"),  # carrier-grade NAT
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
    ],
)
def test_a_name_may_not_lead_to_an_address_that_is_not_public(address, kind):
    why = forbidden(ipaddress.ip_address(address))
    assert why is not None and kind in why


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_a_public_address_is_not_forbidden(address):
    assert forbidden(ipaddress.ip_address(address)) is None


def test_an_allow_list_is_shown_with_where_each_entry_comes_from():
    listed = AllowList(
        (entry("api.example.com", "its API"), entry("login.example.com", "its API"), entry("127.0.0.1:8080", "URL"))
    )
    assert listed.shown() == "api.example.com, login.example.com (its API), 127.0.0.1:8080 (URL)"
    assert AllowList().shown() == "nothing"
    assert listed.plus([entry("127.0.0.1:8080", "URL"), entry("x.org")]).entries[-1] == entry("x.org")
