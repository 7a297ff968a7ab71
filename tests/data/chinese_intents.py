"""A Chinese customer-service intent data set, made from templates: deterministic for a seed, no network.

    python -m tests.data.chinese_intents OUT.csv [ROWS] [SEED]

Columns: message (free text without spaces between words: full-width and ASCII punctuation, order numbers, amounts
in ￥/¥/元, dates, Latin product and service names, a few traditional characters and emoji), channel (app, web or
电话), wait_minutes (a number) and intent (one of INTENTS). Several intents share their words (订单, 退, 地址, 快递,
账户 ...), so a message's intent follows from its words together rather than from any one of them."""

import csv
import random
import re
import sys

INTENTS = ("查询订单", "退款", "修改地址", "发票", "物流", "账户登录", "优惠券", "投诉")
CHANNELS = ("app", "web", "电话")

_OPENERS = ("", "", "你好，", "您好！", "客服你好，", "請問", "在吗？", "麻烦问一下：", "Hi，", "急！", "【求助】")
_CLOSERS = ("", "", "谢谢。", "谢谢！", "多谢～", "麻烦尽快处理。", "🙏", "谢谢😊", "…", "急急急！！", "好吗?")
_CLOSERS += ("thanks",)
_PRODUCTS = (
    "iPhone 15",
    "iPhone手机壳",
    "蓝牙耳机",
    "《三体》全集",
    "WiFi路由器",
    "电饭煲",
    "运动鞋",
    "App会员",
    "VIP年卡",
    "充电宝",
    "機械鍵盤",
    "羽绒服",
)
_CARRIERS = ("顺丰", "SF Express", "中通", "圆通", "京东物流", "EMS")
_CITIES = ("北京", "上海", "广州", "深圳", "杭州", "成都", "台北", "香港")
_QUESTION_MARKS = ("？", "?", "？？", "", "呢？", "；")
_STREETS = ("朝阳区建国路88号", "浦东新区世纪大道100号", "天河区体育西路（近地铁站）", "南山区科技园3栋1202室")

_TEMPLATES = {
    "查询订单": (
        "我的订单{order}现在是什么状态{q}",
        "帮我查一下订单{order}，下单日期是{date}{q}",
        "{date}买的{product}，订单显示“处理中”，怎么回事{q}",
        "订单号：{order}，请问发货了没有{q}",
        "查询订單{order}的進度",
        "我在App上看不到订单{order}了，能帮我查下吗{q}",
        "下单{amount}的{product}，订单状态一直没更新",
    ),
    "退款": (
        "订单{order}申请退款，钱什么时候到账{q}",
        "退的{product}已经寄回，退款{amount}还没到",
        "我要退款！{product}质量太差了",
        "退款用PayPal付的，能原路退回吗{q}",
        "{date}申请的退款{amount}，显示“退款中”好几天了",
        "不想要了，{product}能退钱吗{q}",
        "退貨退款怎麼操作{q}订单{order}",
    ),
    "修改地址": (
        "订单{order}的收货地址写错了，要改成{city}{street}",
        "能不能修改地址？新地址：{city}{street}",
        "地址填错了{q}还没发货的话帮我改一下",
        "搬家了，收货地址改为{city}{street}，订单{order}",
        "{product}请送到{city}{street}，不要送原来的地址",
        "怎么在App里修改默认地址{q}",
        "改地址：{city}（原地址作废）",
    ),
    "发票": (
        "订单{order}需要开发票，抬头是公司",
        "请问发票什么时候开好{q}金额{amount}",
        "我要开增值税专用发票，税号怎么填{q}",
        "{date}买的{product}能补开发票吗{q}",
        "电子发票发到邮箱没收到，订单{order}",
        "發票抬頭寫錯了，能重开吗{q}",
        "发票金额和实付{amount}不一致",
        "发票、保修卡都没收到，订单{order}",
    ),
    "物流": (
        "快递到哪了{q}订单{order}",
        "{carrier}的单号{tracking}三天没更新了",
        "{product}什么时候能送到{city}{q}",
        "物流显示已签收，但我没收到快递！",
        "我的包裹在{city}中转站停了好几天",
        "能不能换{carrier}发货{q}",
        "快递员说{date}派送，结果没来",
        "物流一直显示‘运输中’，{product}到底到哪了{q}",
    ),
    "账户登录": (
        "App登录不了，一直提示密码错误",
        "验证码收不到，手机号是{phone}",
        "账户被锁定了怎么办{q}",
        "忘记密码，怎么找回账户{q}",
        "VIP账户在新手机上登录后会员没了",
        "連WiFi的时候登录总是失败",
        "换了手机号{phone}，账户登录要怎么改{q}",
    ),
    "优惠券": (
        "优惠券用不了，满{amount}减{small}的那张",
        "领的优惠券在哪里看{q}",
        "下单时忘记用优惠券了，能补吗{q}订单{order}",
        "VIP的优惠券{date}就过期了吗{q}",
        "{product}能用优惠码吗{q}",
        "为什么我的券显示“不可用”{q}",
        "新人优惠券没到账户里",
    ),
    "投诉": (
        "我要投诉！客服态度太差",
        "投诉{carrier}的快递员，东西被摔坏了",
        "{product}是假货，我要投诉商家！",
        "订单{order}拖了{days}天还没处理，太过分了",
        "退款拖了这么久，我要投訴",
        "买了{amount}的{product}，质量问题没人管，投诉",
        "电话打了{days}次都没人解决，非常不满意！！",
    ),
}


def _slots(rng: random.Random) -> dict:
    yuan = rng.choice((rng.randint(9, 99), rng.randint(100, 9999), round(rng.uniform(5, 500), 2)))
    month, day = rng.randint(1, 12), rng.randint(1, 28)
    return {
        "order": rng.choice(("", "#", "No.", "号")) + str(rng.randint(10**9, 10**10 - 1)),
        "tracking": "SF" + str(rng.randint(10**11, 10**12 - 1)),
        "amount": rng.choice((f"￥{yuan}", f"¥{yuan}", f"{yuan}元", f"{yuan}块")),
        "small": rng.choice(("5元", "10元", "￥20", "50")),
        "date": rng.choice((f"{month}月{day}日", f"2024-{month:02d}-{day:02d}", f"{month}/{day}", "昨天", "上周")),
        "product": rng.choice(_PRODUCTS),
        "carrier": rng.choice(_CARRIERS),
        "city": rng.choice(_CITIES),
        "street": rng.choice(_STREETS),
        "phone": "1" + str(rng.randint(3 * 10**9, 9 * 10**9)),
        "days": rng.randint(2, 30),
        "q": rng.choice(_QUESTION_MARKS),
    }


def records(n: int, seed: int = 0) -> list:
    """n (message, channel, wait_minutes, intent) rows, the same for the same n and seed."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        intent = rng.choice(INTENTS)
        body = rng.choice(_TEMPLATES[intent]).format(**_slots(rng))
        message = rng.choice(_OPENERS) + body + rng.choice(_CLOSERS)
        channel = rng.choices(CHANNELS, weights=(6, 3, 1))[0]
        wait = round(rng.expovariate(1 / (12 if intent == "投诉" else 5)), 1)
        out.append((message, channel, wait, intent))
    return out


def rows(n: int, seed: int = 0) -> list:
    """n (message, intent) pairs: records(n, seed) without its other columns."""
    return [(message, intent) for message, _, _, intent in records(n, seed)]


def write_csv(path, n: int, seed: int = 0) -> None:
    """Writes records(n, seed) with a header: message, channel, wait_minutes, intent (UTF-8)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(("message", "channel", "wait_minutes", "intent"))
        writer.writerows(records(n, seed))


def characters() -> list:
    """Every character a message can hold, sorted: what a vocabulary covering the data set must hold."""
    texts = [*_OPENERS, *_CLOSERS, *_PRODUCTS, *_CARRIERS, *_CITIES, *_STREETS, "#No.号SF-/0123456789"]
    texts += [re.sub(r"\{\w+\}", "", t) for templates in _TEMPLATES.values() for t in templates]
    texts += [*_QUESTION_MARKS, "月日昨天上周", "￥¥元块"]
    return sorted(set("".join(texts)))


if __name__ == "__main__":
    args = sys.argv[1:]
    write_csv(args[0], int(args[1]) if len(args) > 1 else 1000, int(args[2]) if len(args) > 2 else 0)
