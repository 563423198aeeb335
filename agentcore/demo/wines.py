"""The ``Wine`` record and the cellar's seed list.

The seed is a text table rather than 44 constructor calls so it reads like the cellar book it is
(and the formatter leaves it alone). Ids are fixed: seeding inserts "or ignore" by id, so reopening
a cellar never resets stock the agent has changed, and a later release can append new wines.
Prices are US dollars a bottle; ``NV`` marks a non-vintage wine.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Wine:
    id: int
    name: str
    producer: str
    region: str
    country: str
    grape: str  # one grape, or the blend's grapes comma-separated, the main one first
    vintage: int | None  # None: non-vintage
    price: float  # US dollars a bottle
    stock: int  # bottles in the cellar
    notes: str

    @property
    def vintage_label(self) -> str:
        return str(self.vintage) if self.vintage is not None else "NV"

    @property
    def label(self) -> str:
        """Producer and wine, without repeating a château that is both."""
        return self.name if self.name == self.producer else f"{self.producer} — {self.name}"

    @property
    def title(self) -> str:
        return f"{self.label} {self.vintage_label}"


# id | name | producer | region | country | grape | vintage | price | stock | tasting notes
_SEED_TABLE = """\
1 | Château Margaux | Château Margaux | Bordeaux | France | Cabernet Sauvignon, Merlot, Petit Verdot | 2015 | 950.00 | 3 | Violets, cassis and cedar over silky, very fine tannins; a finish that lasts minutes. Drink 2028-2060.
2 | Château Léoville-Barton | Château Léoville-Barton | Bordeaux | France | Cabernet Sauvignon, Merlot | 2016 | 110.00 | 6 | Blackcurrant, graphite and cigar box; firm, classic Saint-Julien structure that needs another five years.
3 | Château Sociando-Mallet | Château Sociando-Mallet | Bordeaux | France | Cabernet Sauvignon, Merlot | 2018 | 55.00 | 12 | Ripe plum and blackberry, a touch of oak spice; generous and already approachable with decanting.
4 | Château Figeac | Château Figeac | Bordeaux | France | Cabernet Franc, Cabernet Sauvignon, Merlot | 2019 | 320.00 | 2 | Red cherry, fresh herbs and pencil shavings; aromatic, elegant and tightly wound.
5 | Château Climens | Château Climens | Bordeaux | France | Sémillon | 2017 | 85.00 | 4 | Sweet Barsac: apricot, honey and lemon curd, lifted by bright acidity. Lovely with blue cheese.
6 | Gevrey-Chambertin Mes Cinq Terroirs | Domaine Denis Mortet | Burgundy | France | Pinot Noir | 2019 | 120.00 | 4 | Dark cherry, earth and a little smoke; dense for a village wine, with a savoury finish.
7 | Chambolle-Musigny | Domaine Ghislaine Barthod | Burgundy | France | Pinot Noir | 2018 | 140.00 | 2 | Raspberry, rose petal and wet stone; lacy, perfumed and precise.
8 | Bourgogne Rouge | Domaine Michel Lafarge | Burgundy | France | Pinot Noir | 2020 | 38.00 | 12 | Bright red fruit, light body and a gentle earthy note; an easy weeknight Burgundy.
9 | Meursault | Domaine Roulot | Burgundy | France | Chardonnay | 2020 | 210.00 | 0 | Hazelnut, lemon and struck flint; taut and mineral rather than buttery.
10 | Chablis Premier Cru Montée de Tonnerre | William Fèvre | Burgundy | France | Chardonnay | 2021 | 62.00 | 8 | Oyster shell, green apple and lemon zest; saline and crisp. Made for oysters.
11 | Puligny-Montrachet | Domaine Leflaive | Burgundy | France | Chardonnay | 2019 | 180.00 | 3 | White peach, acacia and a light toast; creamy texture with a long, chalky finish.
12 | Morgon Côte du Py | Jean Foillard | Beaujolais | France | Gamay | 2021 | 42.00 | 10 | Crushed strawberry, violet and granite; juicy and serious. Serve slightly cool.
13 | Châteauneuf-du-Pape La Crau | Domaine du Vieux Télégraphe | Rhône | France | Grenache, Syrah, Mourvèdre | 2019 | 75.00 | 6 | Kirsch, garrigue herbs and black olive; warm, broad and spicy. Great with lamb.
14 | Côte-Rôtie Brune et Blonde | E. Guigal | Rhône | France | Syrah, Viognier | 2018 | 95.00 | 4 | Blackberry, bacon fat and black pepper with a floral lift from the Viognier.
15 | Crozes-Hermitage | Alain Graillot | Rhône | France | Syrah | 2020 | 35.00 | 12 | Blueberry, olive and cracked pepper; fresh, medium-bodied and great value.
16 | Condrieu Les Terrasses de l'Empire | Georges Vernay | Rhône | France | Viognier | 2021 | 85.00 | 3 | Apricot, honeysuckle and ginger; rich yet fresh. Try it with spiced dishes.
17 | Sancerre | Domaine Vacheron | Loire | France | Sauvignon Blanc | 2022 | 45.00 | 10 | Grapefruit, cut grass and flint; racy acidity. Classic with goat cheese.
18 | Vouvray Le Haut-Lieu Sec | Domaine Huet | Loire | France | Chenin Blanc | 2020 | 48.00 | 6 | Quince, beeswax and chamomile; dry, textured and long-lived.
19 | Chinon Les Granges | Bernard Baudry | Loire | France | Cabernet Franc | 2020 | 28.00 | 9 | Red currant, graphite and bell pepper; light and crunchy. Serve cool.
20 | Blanc de Blancs Premier Cru Brut | Pierre Gimonnet | Champagne | France | Chardonnay | NV | 55.00 | 12 | Lemon, brioche and chalk with a fine mousse; an elegant aperitif.
21 | Grande Cuvée | Krug | Champagne | France | Pinot Noir, Chardonnay, Pinot Meunier | NV | 250.00 | 2 | Toasted nuts, candied citrus and honey; deep, complex and endlessly long.
22 | Barolo Monprivato | Giuseppe Mascarello | Piedmont | Italy | Nebbiolo | 2016 | 190.00 | 2 | Rose, tar and sour cherry; towering tannins under perfumed fruit. Decant for hours.
23 | Barbaresco | Produttori del Barbaresco | Piedmont | Italy | Nebbiolo | 2019 | 48.00 | 12 | Red cherry, dried roses and licorice; fine tannins. Superb with truffle pasta.
24 | Barbera d'Alba | G.D. Vajra | Piedmont | Italy | Barbera | 2021 | 24.00 | 18 | Black cherry and plum with lively acidity and soft tannins; a pizza and pasta wine.
25 | Brunello di Montalcino | Il Poggione | Tuscany | Italy | Sangiovese | 2017 | 70.00 | 6 | Dried cherry, leather and tobacco; firm and warm. Pair with bistecca.
26 | Chianti Classico | Fontodi | Tuscany | Italy | Sangiovese | 2020 | 36.00 | 14 | Sour cherry, violets and dried herbs; bright acidity, food-friendly.
27 | Tignanello | Marchesi Antinori | Tuscany | Italy | Sangiovese, Cabernet Sauvignon, Cabernet Franc | 2019 | 140.00 | 5 | Black cherry, cedar and sweet spice; polished, modern and structured.
28 | Etna Rosso | Tenuta delle Terre Nere | Sicily | Italy | Nerello Mascalese | 2021 | 30.00 | 10 | Wild strawberry, volcanic ash and herbs; Pinot-like lightness with grip.
29 | Amarone della Valpolicella Classico | Allegrini | Veneto | Italy | Corvina, Rondinella | 2017 | 75.00 | 4 | Raisin, fig and bitter chocolate; big, velvety and 15.5% alcohol. A fireside wine.
30 | Soave Classico | Pieropan | Veneto | Italy | Garganega | 2022 | 22.00 | 15 | Almond blossom, pear and a bitter-almond finish; light and refreshing.
31 | Rioja Gran Reserva 904 | La Rioja Alta | Rioja | Spain | Tempranillo, Graciano | 2015 | 65.00 | 6 | Red fruit, vanilla, dill and old leather from long American oak ageing.
32 | Viña Tondonia Reserva | R. López de Heredia | Rioja | Spain | Tempranillo, Garnacha | 2011 | 55.00 | 5 | Dried cherry, tea leaves and spice; traditional, ethereal and savoury.
33 | Albariño | Pazo de Señoráns | Rías Baixas | Spain | Albariño | 2022 | 26.00 | 12 | Peach, lime and sea spray; vibrant. Perfect with grilled seafood.
34 | Les Terrasses | Álvaro Palacios | Priorat | Spain | Garnacha, Cariñena | 2020 | 48.00 | 6 | Blackberry, licorice and slate; powerful and mineral.
35 | Wehlener Sonnenuhr Riesling Kabinett | Joh. Jos. Prüm | Mosel | Germany | Riesling | 2021 | 40.00 | 12 | Green apple, white flowers and slate; off-dry, 8% alcohol, thrilling acidity. Great with spicy food.
36 | Grüner Veltliner Federspiel Terrassen | Domäne Wachau | Wachau | Austria | Grüner Veltliner | 2022 | 20.00 | 18 | White pepper, green pea and citrus; crisp and light. Good with schnitzel and salads.
37 | Vintage Port | Taylor's | Douro | Portugal | Touriga Nacional, Touriga Franca | 2017 | 110.00 | 3 | Blackberry, violet and dark chocolate; sweet, fortified and built for decades.
38 | Artemis Cabernet Sauvignon | Stag's Leap Wine Cellars | Napa Valley | USA | Cabernet Sauvignon | 2019 | 70.00 | 8 | Cassis, mocha and sage; plush and ripe with supple tannins.
39 | Geyserville | Ridge Vineyards | Sonoma County | USA | Zinfandel, Carignan, Petite Sirah | 2020 | 50.00 | 6 | Brambly raspberry, black pepper and sweet oak; bold yet balanced. Barbecue wine.
40 | Pinot Noir Dundee Hills | Domaine Drouhin Oregon | Willamette Valley | USA | Pinot Noir | 2021 | 45.00 | 7 | Cranberry, cherry and forest floor; silky and fresh. Lovely with salmon.
41 | Sauvignon Blanc | Cloudy Bay | Marlborough | New Zealand | Sauvignon Blanc | 2023 | 32.00 | 14 | Passion fruit, lime and fresh herbs; zesty and aromatic.
42 | Bin 389 Cabernet Shiraz | Penfolds | South Australia | Australia | Cabernet Sauvignon, Shiraz | 2020 | 75.00 | 6 | Blackcurrant, mint and mocha; rich, ripe and firmly built.
43 | Catena Alta Malbec | Catena Zapata | Mendoza | Argentina | Malbec | 2019 | 55.00 | 8 | Blackberry, violet and cocoa; dense high-altitude fruit with fresh acidity. Steak wine.
44 | Old Vines White | Mullineux | Swartland | South Africa | Chenin Blanc, Clairette Blanche | 2021 | 38.00 | 6 | Yellow apple, straw and wet stone; textured, savoury and long.
"""


def _parse_seed_line(line: str) -> Wine:
    fields = [field.strip() for field in line.split("|")]
    wine_id, name, producer, region, country, grape, vintage, price, stock, notes = fields
    return Wine(
        id=int(wine_id),
        name=name,
        producer=producer,
        region=region,
        country=country,
        grape=grape,
        vintage=None if vintage == "NV" else int(vintage),
        price=float(price),
        stock=int(stock),
        notes=notes,
    )


SEED_WINES: tuple[Wine, ...] = tuple(
    _parse_seed_line(line) for line in _SEED_TABLE.splitlines() if line.strip()
)
